package replay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// TestCrashChild is the reconcile process of
// TestCrashReconcileSurvivesSIGKILL: the test binary re-executed with
// REPLAYCTL_CRASH_CHILD set. In a normal run it does nothing.
func TestCrashChild(t *testing.T) {
	if os.Getenv(crashChildEnv) == "" {
		t.Skip("reconcile process of TestCrashReconcileSurvivesSIGKILL")
	}
	ctx := context.Background()
	// A generous policy timeout: a child slowed by -race must not fail
	// closed, which would only blur what the kills did.
	eng, _, err := policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(os.Getenv(crashDBEnv), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	src, err := source.Parse("jsonl:" + os.Getenv(crashSourceEnv))
	if err != nil {
		t.Fatal(err)
	}
	target := &announcingDispatcher{next: replay.NewHTTPTarget(os.Getenv(crashTargetEnv), "", 5*time.Second, nil)}
	r := &replay.Reconciler{Engine: eng, Store: st, MaxParallel: 4, Actor: "crash-child",
		Router: replay.NewRulesRouter(eng.Rules, &replay.Route{Name: "sink", Dispatcher: target})}
	fmt.Println(markReady)
	switch os.Getenv(crashModeEnv) {
	case "single", "bulk":
		crashChildReplays(t, r, st, src, os.Getenv(crashModeEnv))
		return
	}
	if _, err := r.Run(ctx, []source.Source{src}); err != nil {
		t.Fatal(err)
	}
}

// TestCrashReconcileSurvivesSIGKILL runs reconcile as a separate process
// against a slow sink, kills it with SIGKILL at many points, restarts it,
// and proves: no key reached the target twice without an outcome_unknown
// record, no entry was lost, and no dispatching record outlived a restart.
func TestCrashReconcileSurvivesSIGKILL(t *testing.T) {
	minKills := 50
	if testing.Short() {
		minKills = 10
	}
	began := time.Now()
	paths := newCrashPaths(t)
	entries := makeCrashEntries(320, 16) // 300 auto_replay, 20 quarantine
	rng := rand.New(rand.NewPCG(20240611, 7))
	sink := newCrashSink(t, rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())))

	// Each child is killed 5-80ms after it opened the store (or, one time
	// in five, after it started, so that some kills land while it opens
	// the store), unless it finishes first.
	kills, midDispatch, completed := 0, 0, 0
	deadline := time.Now().Add(3 * time.Minute)
	for kills < minKills {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d kills before the deadline", kills, minKills)
		}
		writeCrashSource(t, paths.source, entries, rng)
		c := startCrashChild(t, paths.db, paths.source, sink.srv.URL)
		fromStart := rng.IntN(5) == 0
		delay := time.Duration(5+rng.IntN(76)) * time.Millisecond
		if !fromStart {
			select {
			case <-c.out.ready:
			case err := <-c.done:
				t.Fatalf("reconcile child exited before opening the store: %v\n%s", err, c.out)
			}
		}
		timer := time.NewTimer(delay)
		select {
		case err := <-c.done:
			timer.Stop()
			if err != nil {
				t.Fatalf("reconcile child failed on its own: %v\n%s", err, c.out)
			}
			completed++
			continue
		case <-timer.C:
		}
		dispatching := happened(c.out.dispatch)
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill reconcile child: %v", err)
		}
		switch err := <-c.done; {
		case err == nil:
			completed++ // it finished as the signal was sent
		case killedBySIGKILL(err):
			kills++
			if dispatching {
				midDispatch++
			}
		default:
			t.Fatalf("reconcile child failed on its own: %v\n%s", err, c.out)
		}
	}

	// Restart without killing: the first run recovers what the last kill
	// left and finishes the work; the next must find nothing to dispatch.
	finalRuns := 0
	for {
		finalRuns++
		writeCrashSource(t, paths.source, entries, rng)
		before := sink.deliveries()
		c := startCrashChild(t, paths.db, paths.source, sink.srv.URL)
		if err := <-c.done; err != nil {
			t.Fatalf("final reconcile run %d: %v\n%s", finalRuns, err, c.out)
		}
		if finalRuns == 1 {
			continue
		}
		if n := sink.deliveries() - before; n != 0 {
			t.Errorf("reconcile run %d, after a complete run, dispatched %d more replays", finalRuns, n)
			if finalRuns < 4 {
				continue
			}
		}
		break
	}
	delivered := sink.stop() // waits for requests still in flight

	st, err := bolt.Open(paths.db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := checkCrashRun(t, st, entries, delivered)
	if f.recoveries == 0 {
		t.Errorf("no recovery record after %d kills: either no kill landed mid-dispatch (the test proved nothing) or restarts do not recover", kills)
	}
	t.Logf("%d SIGKILLs (%d after the child's first dispatch), %d runs finished before their kill, %d final runs; took %v",
		kills, midDispatch, completed, finalRuns, time.Since(began).Round(time.Millisecond))
	t.Logf("sink: %d deliveries of %d keys, %d keys delivered more than once; ledger: %d succeeded, %d outcome_unknown (%d recovery records)",
		f.deliveries, len(delivered), f.twice, f.succeeded, f.unknown, f.recoveries)
}

// TestCrashTargetDropAfterReceipt: a target that takes a replay in full
// and then drops the connection without answering (it crashed, or a proxy
// did) leaves the replay's outcome unknown. The dispatcher must say so,
// and must not send the key a second time on its own: a resend would be
// a blind retry the ledger and the audit chain never see.
func TestCrashTargetDropAfterReceipt(t *testing.T) {
	target := newDroppingTarget(t)
	h := replay.NewHTTPTarget("http://"+target.ln.Addr().String()+"/replay", "", 5*time.Second, nil)
	results := map[string]replay.Result{}
	// The drop needs a kept-alive connection: dispatch until one was reused.
	for i := 0; i < 50; i++ {
		if key, _ := target.droppedKey(); key != "" {
			break
		}
		key := fmt.Sprintf("drop-%02d", i)
		e := &entry.Entry{ID: key, Source: "jsonl", IdempotencyKey: key, Payload: []byte(`{"n":1}`)}
		results[key] = h.Dispatch(context.Background(), replay.Request{Entry: e, Key: key, Attempt: 1})
	}
	key, seen := target.droppedKey()
	if key == "" {
		t.Fatal("no dispatch reused a kept-alive connection: the target never dropped one")
	}
	res := results[key]
	if seen > 1 && res.Outcome == replay.Succeeded {
		t.Fatalf("net/http resent key %s (%d deliveries) after the target "+
			"took the request and dropped the connection, and the dispatch reported %s (%s) with one dispatch intent "+
			"and no outcome_unknown record. The Idempotency-Key header makes net/http treat the POST as replayable "+
			"(Request.isReplayable) and retry it on a reused connection; fix: req.GetBody = nil before Client.Do, "+
			"so an answerless send ends outcome_unknown", key, seen, res.Outcome, res.Detail)
	}
	if seen != 1 {
		t.Errorf("key %s reached the target %d times from one dispatch", key, seen)
	}
	if res.Outcome != replay.Unknown {
		t.Errorf("key %s taken by the target and never answered: outcome %s (%s), want %s", key, res.Outcome, res.Detail, replay.Unknown)
	}
}

// crashFigures are what checkCrashRun counted.
type crashFigures struct {
	deliveries, twice  int
	succeeded, unknown int
	recoveries         int
}

// checkCrashRun checks the store and the sink's counts against every
// invariant a kill must not break.
func checkCrashRun(t *testing.T, st *bolt.Bolt, entries []crashEntry, delivered map[string]int) crashFigures {
	ctx := context.Background()
	var f crashFigures

	// The audit chain: intents, recoveries and outcome_unknown outcomes.
	intents := map[string]int{}     // dispatch records (ledger -> dispatching) per key
	unknownRec := map[string]bool{} // keys with a record saying outcome_unknown
	if err := audit.Each(ctx, st, audit.Query{}, func(r audit.Record) error {
		if r.Kind == audit.KindDispatch {
			intents[r.Key]++
		}
		if r.Kind == audit.KindRecovery {
			f.recoveries++
		}
		// A recovery that did not end in outcome_unknown does not count.
		if (r.Kind == audit.KindRecovery || r.Kind == audit.KindOutcome) && r.Outcome == string(idempotency.OutcomeUnknown) {
			unknownRec[r.Key] = true
		}
		return nil
	}); err != nil {
		t.Fatalf("read audit chain: %v", err)
	}
	if res, err := audit.Verify(ctx, st, nil); err != nil || !res.OK() {
		t.Errorf("audit chain does not verify: %+v %v", res, err)
	}

	ledger := map[string]idempotency.Record{}
	if err := st.LedgerRecords(ctx, func(r *idempotency.Record) error {
		ledger[r.Key] = *r
		return nil
	}); err != nil {
		t.Fatalf("read ledger: %v", err)
	}
	stored := map[string]*store.EntryRecord{}
	if err := st.Entries(ctx, func(er *store.EntryRecord) error {
		stored[er.Entry.ID] = er
		return nil
	}); err != nil {
		t.Fatalf("read entries: %v", err)
	}

	// 1. No key reached the sink twice without an outcome_unknown record,
	// and none reached it more often than an intent was recorded for it.
	for key, n := range delivered {
		f.deliveries += n
		if n > 1 {
			f.twice++
			if !unknownRec[key] && ledger[key].State != idempotency.OutcomeUnknown {
				t.Errorf("key %s delivered %d times with no outcome_unknown record (ledger %s)", key, n, ledger[key].State)
			}
		}
		if n > intents[key] {
			t.Errorf("key %s delivered %d times but only %d dispatch intents recorded: a replay left without its record", key, n, intents[key])
		}
	}
	for key, n := range intents {
		if n > 1 {
			t.Errorf("key %s has %d dispatch intents: the sink never fails, so a second one is a blind retry", key, n)
		}
	}

	// 2. No entry lost: each one is stored, decided, and where its action
	// leads: replayed, outcome_unknown (a kill's), or quarantined.
	if len(stored) != len(entries) {
		t.Errorf("%d entries stored, the source has %d", len(stored), len(entries))
	}
	for _, ce := range entries {
		er := stored[ce.ID]
		if er == nil {
			t.Errorf("entry %s lost: not in the store", ce.ID)
			continue
		}
		if er.Status == "" || er.LastDecision == 0 {
			t.Errorf("entry %s stored without a status or decision: status %q, decision %d", ce.ID, er.Status, er.LastDecision)
		}
		rec, ok := ledger[ce.Key]
		if !ok {
			t.Errorf("entry %s (%s): key %s not in the ledger", ce.ID, er.Status, ce.Key)
			continue
		}
		switch {
		case ce.Quarantine:
			if er.Status != store.StatusQuarantined || er.Hold != store.HoldQuarantine || rec.State != idempotency.Decided {
				t.Errorf("entry %s should be quarantined: status %s, hold %q, ledger %s", ce.ID, er.Status, er.Hold, rec.State)
			}
			if delivered[ce.Key] != 0 || intents[ce.Key] != 0 {
				t.Errorf("quarantined entry %s reached the sink %d times (%d intents)", ce.ID, delivered[ce.Key], intents[ce.Key])
			}
		case rec.State == idempotency.Succeeded:
			f.succeeded++
			if er.Status != store.StatusReplayed {
				t.Errorf("entry %s: ledger succeeded but status %s", ce.ID, er.Status)
			}
		case rec.State == idempotency.OutcomeUnknown:
			f.unknown++
			// Recovery marks it outcome_unknown; the next run, having no
			// probe, hands it to a person (manual_review).
			if er.Status != store.StatusUnknown && er.Status != store.StatusManualReview {
				t.Errorf("entry %s: ledger outcome_unknown but status %s", ce.ID, er.Status)
			}
			if !unknownRec[ce.Key] {
				t.Errorf("entry %s: ledger outcome_unknown with no recovery or outcome record", ce.ID)
			}
		default:
			t.Errorf("entry %s lost on the way: ledger %s, status %s (want succeeded or outcome_unknown)", ce.ID, rec.State, er.Status)
		}
	}

	// 3 and 4. Every dispatching record was resolved; every success was
	// seen by the sink.
	for key, rec := range ledger {
		switch rec.State {
		case idempotency.Dispatching:
			t.Errorf("key %s left dispatching: no restart resolved it", key)
		case idempotency.Succeeded:
			if delivered[key] == 0 {
				t.Errorf("key %s succeeded but never reached the sink", key)
			}
		}
	}
	return f
}
