package maintenance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

// TestRecovererWorkerChild is the worker process that
// TestRecovererOnPostgresRecoversOnlyADeadWorkersDispatch kills while its
// dispatch is in flight (the test binary re-executed); it does nothing in a
// normal run.
func TestRecovererWorkerChild(t *testing.T) {
	if os.Getenv("REPLAYCTL_RECOVER_CHILD") == "" {
		t.Skip("worker process of TestRecovererOnPostgresRecoversOnlyADeadWorkersDispatch")
	}
	ctx := context.Background()
	pg, err := postgres.Open(ctx, os.Getenv("REPLAYCTL_STORE"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	rc := pgReplayer(t, pg, os.Getenv("REPLAYCTL_RULES"), os.Getenv("REPLAYCTL_TARGET"), "dead-worker", time.Second)
	er := entryOf(t, pg, os.Getenv("REPLAYCTL_REF"))
	if _, err := rc.One(ctx, er); err != nil {
		t.Fatal(err)
	}
}

func pgReplayer(t *testing.T, pg *postgres.Postgres, rules, target, owner string, lease time.Duration) *replay.Reconciler {
	t.Helper()
	eng, _, err := policy.LoadEngine(context.Background(), rules, "../../policies", 0)
	if err != nil {
		t.Fatal(err)
	}
	h := replay.NewHTTPTarget(target, "", time.Minute, nil)
	return &replay.Reconciler{Engine: eng, Store: pg, Actor: owner, Owner: owner, MaxParallel: 1, Lease: lease,
		Router: replay.NewRulesRouter(eng.Rules, &replay.Route{Name: "sink", Dispatcher: h})}
}

// On PostgreSQL a dispatching record may be a live worker's. A worker
// killed while its dispatch is in flight leaves its key dispatching under
// a lease that runs out; the recovery duty's round claims that entry (its
// lease ended), turns the key outcome_unknown under the claim's fence,
// audited, and frees it. Another worker's dispatch, in flight under a live
// lease at the same moment, is left alone and its outcome is recorded.
// Before, the duty refused a shared store and the dead worker's entry
// stayed replaying until a run's claim reached it.
func TestRecovererOnPostgresRecoversOnlyADeadWorkersDispatch(t *testing.T) {
	dsn := testsvc.Postgres(t)
	ctx := context.Background()
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte(autoReplayRules), 0o644); err != nil {
		t.Fatal(err)
	}
	dlq := filepath.Join(dir, "dlq.jsonl")
	if err := os.WriteFile(dlq, []byte(
		`{"id":"dead","topic":"tool.email.send","reason_code":"timeout","attempts":3,"idempotency_key":"k-dead","payload":{"n":1}}`+"\n"+
			`{"id":"live","topic":"tool.email.send","reason_code":"timeout","attempts":3,"idempotency_key":"k-live","payload":{"n":2}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.Parse("jsonl:" + dlq)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := postgres.Open(ctx, dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	refs := map[string]string{}
	var recs []*store.EntryRecord
	for e, err := range src.Entries(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		refs[e.IdempotencyKey] = e.Ref()
		recs = append(recs, &store.EntryRecord{Entry: e, Status: store.StatusPending})
	}
	if n, err := pg.Ingest(ctx, recs); err != nil || n != 2 {
		t.Fatalf("ingest: %d %v", n, err)
	}

	arrived := make(chan string, 2)
	releaseLive, testDone := make(chan struct{}), make(chan struct{})
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		arrived <- key
		if key == "k-live" {
			select {
			case <-releaseLive:
			case <-testDone:
			}
			return
		}
		select { // the dead worker's: held until its process is killed
		case <-r.Context().Done():
		case <-testDone:
		}
	}))
	defer sink.Close()
	defer close(testDone) // before the sink closes: no request left held
	waitArrival := func(want string) {
		t.Helper()
		select {
		case got := <-arrived:
			if got != want {
				t.Fatalf("dispatch of %q arrived, want %q", got, want)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("the dispatch of %s did not arrive", want)
		}
	}

	// The live worker: its dispatch of k-live in flight under a long lease.
	live := pgReplayer(t, pg, rules, sink.URL, "live-worker", time.Minute)
	type outcome struct {
		res replay.EntryResult
		err error
	}
	liveDone := make(chan outcome, 1)
	liveRec := entryOf(t, pg, refs["k-live"])
	go func() {
		res, err := live.One(ctx, liveRec)
		liveDone <- outcome{res, err}
	}()
	waitArrival("k-live")

	// The dead worker: another process, killed while its dispatch of
	// k-dead is in flight under a one-second lease.
	child := exec.Command(os.Args[0], "-test.run=^TestRecovererWorkerChild$", "-test.count=1")
	child.Env = append(os.Environ(), "REPLAYCTL_RECOVER_CHILD=1", "REPLAYCTL_STORE="+dsn, "REPLAYCTL_RULES="+rules,
		"REPLAYCTL_TARGET="+sink.URL, "REPLAYCTL_REF="+refs["k-dead"])
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	waitArrival("k-dead")
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := child.Wait(); !errors.As(err, &exit) {
		t.Fatalf("the worker ended with %v, want killed", err)
	}
	for _, key := range []string{"k-dead", "k-live"} {
		if v, err := pg.LedgerView(ctx, key); err != nil || v.State != triage.StateDispatching {
			t.Fatalf("%s before the round: %+v %v, want dispatching", key, v, err)
		}
	}
	// Until the dead worker's lease has ended, its dispatch is not known
	// to be abandoned: wait for the database's clock to pass it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, _, err := pg.HeldElsewhere(ctx, "live-worker", time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead worker's lease still holds %d entries", n)
		}
		time.Sleep(50 * time.Millisecond)
	}

	p, err := NewRecoverer(pg, "replayctl-recoverer", Options{Every: time.Hour, Tick: newManualTicks().tick})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s := waitRuns(t, p, 1)
	p.Stop()
	if s.Errors != 0 {
		t.Fatalf("recovery round failed: %+v", s)
	}
	if v, err := pg.LedgerView(ctx, "k-dead"); err != nil || v.State != triage.StateOutcomeUnknown {
		t.Fatalf("the dead worker's key after the round: %+v %v, want outcome_unknown", v, err)
	}
	if er := entryOf(t, pg, refs["k-dead"]); er.Status != store.StatusUnknown {
		t.Fatalf("the dead worker's entry after the round is %s, want %s", er.Status, store.StatusUnknown)
	}
	if v, err := pg.LedgerView(ctx, "k-live"); err != nil || v.State != triage.StateDispatching {
		t.Fatalf("the live worker's key after the round: %+v %v, want still dispatching", v, err)
	}
	// The round freed the claim it took: a worker can take the entry.
	c, ok, err := pg.ClaimRef(ctx, refs["k-dead"], "next-worker", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim the recovered entry: %v %v", ok, err)
	}
	if err := pg.Release(ctx, refs["k-dead"], c.Token); err != nil {
		t.Fatal(err)
	}

	close(releaseLive)
	o := <-liveDone
	if o.err != nil {
		t.Fatalf("the live worker's replay: %v", o.err)
	}
	if v, err := pg.LedgerView(ctx, "k-live"); err != nil || v.State != triage.StateSucceeded {
		t.Fatalf("the live worker's key: %+v %v (%s), want succeeded", v, err, o.res.Outcome)
	}
	if _, err := pg.SealAudit(ctx, true); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	if err := audit.Each(ctx, pg, audit.Query{Kind: audit.KindRecovery}, func(r audit.Record) error {
		got[fmt.Sprintf("%s by %s", r.Key, r.Actor)]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["k-dead by replayctl-recoverer"] != 1 {
		t.Fatalf("recovery audit records: %v, want one of k-dead by replayctl-recoverer", got)
	}
}
