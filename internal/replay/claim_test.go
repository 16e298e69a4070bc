package replay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// gatedTarget is a slow target that commits a key when the held request is
// let go, and answers the compensating read (GET ?key=) with what it has
// committed, as the Nexora/Cordum targets of issue 14 do: a probe made
// while the first dispatch is in flight truly says "not committed".
type gatedTarget struct {
	*httptest.Server
	mu       sync.Mutex
	commits  map[string]int
	arrived  chan string
	release  chan struct{}
	lastSeen string
}

func newGatedTarget(t *testing.T) *gatedTarget {
	g := &gatedTarget{commits: map[string]int{}, arrived: make(chan string, 16), release: make(chan struct{})}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			g.mu.Lock()
			n := g.commits[r.URL.Query().Get("key")]
			g.mu.Unlock()
			if n > 0 {
				w.WriteHeader(http.StatusOK)
				return
			}
			w.WriteHeader(http.StatusNotFound)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		g.arrived <- key
		<-g.release
		g.mu.Lock()
		g.commits[key]++
		g.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(g.Server.Close)
	return g
}

// TestSingleReplayRacingAReconcileCommitsOnce is issue 14's first defect:
// a single-entry replay (dlq replay ID / POST .../replay) in flight against
// a slow target while a reconcile and a second single replay run on the
// same entry. Before the one claim model, the reconcile's Recover turned
// the in-flight dispatch into outcome_unknown, its probe said not
// committed, and the first dispatch's 200 was refused or booked against
// another attempt; an approval then sent the key a second time.
func TestSingleReplayRacingAReconcileCommitsOnce(t *testing.T) {
	rounds := 50
	if testing.Short() {
		rounds = 10
	}
	if s := os.Getenv("REPLAYCTL_RACE_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	b := newBundle(t, baseRules)
	g := newGatedTarget(t)
	ctx := context.Background()
	h := NewHTTPTarget(g.URL+"/replay", g.URL+"/committed", 10*time.Second, nil)
	rc := func() *Reconciler {
		return &Reconciler{Engine: b.engine, Store: b.store, Clock: b.clock, Actor: "ops-bot", MaxParallel: 2,
			Router: NewRulesRouter(b.engine.Rules, &Route{Name: "gated", Dispatcher: h, Prober: h})}
	}
	unknownOutcomes := 0
	for i := range rounds {
		id, key := fmt.Sprintf("r%03d", i), fmt.Sprintf("race-%03d", i)
		src := b.jsonl(fmt.Sprintf("dlq-%03d.jsonl", i), transient(id, key))
		ref := "jsonl:" + id
		var e entry.Entry
		for got, err := range src.Entries(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			e = got
		}
		if err := b.store.Update(ctx, func(tx store.Tx) error {
			return tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusPending, FirstSeen: b.clock.Now(), LastSeen: b.clock.Now()})
		}); err != nil {
			t.Fatal(err)
		}

		first := make(chan error, 1)
		go func() {
			er := b.entry(ref)
			_, err := rc().One(ctx, er)
			first <- err
		}()
		if got := <-g.arrived; got != key {
			t.Fatalf("round %d: target got %q", i, got)
		}
		// While the first dispatch is held at the target: a reconcile and
		// a second single replay on the same entry.
		var wg sync.WaitGroup
		var runErr, secondErr error
		wg.Add(2)
		go func() { defer wg.Done(); _, runErr = rc().Run(ctx, []source.Source{src}) }()
		go func() { defer wg.Done(); _, secondErr = rc().One(ctx, b.entry(ref)) }()
		wg.Wait()
		if runErr != nil {
			t.Fatalf("round %d: reconcile during the replay: %v", i, runErr)
		}
		if secondErr != nil && !errors.Is(secondErr, ErrState) {
			t.Fatalf("round %d: second replay: %v", i, secondErr)
		}
		close(g.release)
		if err := <-first; err != nil {
			t.Fatalf("round %d: first replay: %v", i, err)
		}
		g.release = make(chan struct{})
		// A person approves whatever was asked, and the next run acts on it.
		if er := b.entry(ref); er.ApprovalID != "" {
			_ = b.approve(t, ref, "alice")
		}
		close(g.release) // anything dispatched now commits at once
		if _, err := rc().Run(ctx, []source.Source{src}); err != nil {
			t.Fatalf("round %d: later reconcile: %v", i, err)
		}
		g.release = make(chan struct{})
		for len(g.arrived) > 0 {
			<-g.arrived
		}
		if v := b.ledger(key); v.State != triage.StateSucceeded || v.Replays != 1 {
			t.Errorf("round %d: ledger %+v, want succeeded after 1 replay", i, v)
		}
		if er := b.entry(ref); er.Status != store.StatusReplayed {
			t.Errorf("round %d: entry %s (%s), want replayed", i, er.Status, er.Reason)
		}
	}
	g.mu.Lock()
	for k, n := range g.commits {
		if n != 1 {
			t.Errorf("key %s committed %d times at the target", k, n)
		}
	}
	if len(g.commits) != rounds {
		t.Errorf("%d keys committed, want %d", len(g.commits), rounds)
	}
	g.mu.Unlock()
	_ = audit.Each(ctx, b.store, audit.Query{Kind: audit.KindRecovery}, func(audit.Record) error { unknownOutcomes++; return nil })
	if unknownOutcomes != 0 {
		t.Errorf("%d in-flight dispatches were recovered as outcome_unknown", unknownOutcomes)
	}
}

// A dispatching record left by another process instance (a bbolt file's
// previous holder) is recovered, and so is one of this instance's that is
// no longer in flight (its outcome write failed); one in flight is not.
func TestRecoverTouchesOnlyDeadOwners(t *testing.T) {
	b := newBundle(t, baseRules)
	ctx := context.Background()
	// "live" is being dispatched by this process; "ours" is this process's
	// too, but its outcome write failed (nothing is in flight any more).
	end := b.store.BeginDispatch("live")
	defer end()
	for key, owner := range map[string]string{"dead": "otherhost:1:abc", "live": b.store.Instance(), "ours": b.store.Instance()} {
		if err := b.store.Update(ctx, func(tx store.Tx) error {
			if _, err := tx.Transition(idempotency.Transition{Key: key, To: idempotency.Decided, EntryRef: "jsonl:" + key}); err != nil {
				return err
			}
			_, err := tx.Transition(idempotency.Transition{Key: key, From: idempotency.Decided, To: idempotency.Dispatching, Owner: owner})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := Recover(ctx, b.store, "ops-bot")
	if err != nil || n != 2 {
		t.Fatalf("recovered %d (%v), want 2 (dead, ours)", n, err)
	}
	if v := b.ledger("ours"); v.State != triage.StateOutcomeUnknown {
		t.Errorf("this process's dispatch whose outcome write failed: %s", v.State)
	}
	if v := b.ledger("dead"); v.State != triage.StateOutcomeUnknown {
		t.Errorf("dead owner's dispatch: %s", v.State)
	}
	if v := b.ledger("live"); v.State != triage.StateDispatching {
		t.Errorf("this process's in-flight dispatch was touched: %s", v.State)
	}
}

// On PostgreSQL a single replay takes the entry's lease like a run's
// worker: while another worker holds it, the replay is refused (ErrState,
// the API's 409); once free, it dispatches once, under its fence.
func TestSingleReplayOnPostgresTakesTheEntrysLease(t *testing.T) {
	b, pg := sharedBundle(t)
	ctx := context.Background()
	src := b.jsonl("dlq.jsonl", transient("s1", "single-1"))
	var e entry.Entry
	for got, err := range src.Entries(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		e = got
	}
	if _, err := pg.Ingest(ctx, []*store.EntryRecord{{Entry: e, Status: store.StatusPending}}); err != nil {
		t.Fatal(err)
	}
	c, ok, err := pg.ClaimRef(ctx, e.Ref(), "other-worker", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	w := b.worker(pg, "api")
	if _, err := w.One(ctx, c.Entry); !errors.Is(err, ErrState) {
		t.Fatalf("replay while another worker holds the entry: %v, want ErrState", err)
	}
	if n := len(b.sink.deliveries()); n != 0 {
		t.Fatalf("dispatched %d times under another worker's lease", n)
	}
	if err := pg.Release(ctx, e.Ref(), c.Token); err != nil {
		t.Fatal(err)
	}
	res, err := w.One(ctx, c.Entry)
	if err != nil || res.Status != store.StatusReplayed {
		t.Fatalf("replay after release: %+v %v", res, err)
	}
	if n := b.sink.perKey()["single-1"]; n != 1 {
		t.Fatalf("delivered %d times", n)
	}
}
