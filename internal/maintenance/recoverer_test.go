package maintenance

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

const autoReplayRules = `version: v1
defaults:
  max_replays: 3
  owner: platform-oncall
  approver_group: platform-oncall
`

// A bulk replay killed while its dispatch is in flight leaves the entry
// "replaying" and its key "dispatching" under an owner that is gone. The
// recovery duty, at its start, turns it into outcome_unknown (audited, the
// entry marked unknown) without a run: a serve restarted with no
// schedule shows it at once. Before this duty only a run recovered it.
//
// The kill is the state a SIGKILL leaves: the bbolt file as it is while
// the target holds the request (the intent is fsynced before the send;
// nothing else is written until the answer), copied and opened by a new
// process instance.
func TestRecovererRecoversAKilledBulkReplay(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesPath, []byte(autoReplayRules), 0o644); err != nil {
		t.Fatal(err)
	}
	eng, _, err := policy.LoadEngine(ctx, rulesPath, "../../policies", 0)
	if err != nil {
		t.Fatal(err)
	}
	dlq := filepath.Join(dir, "dlq.jsonl")
	if err := os.WriteFile(dlq, []byte(`{"id":"b1","topic":"tool.email.send","reason_code":"timeout","attempts":3,"idempotency_key":"bulk-1","payload":{"to":"b1@example.com"}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.Parse("jsonl:" + dlq)
	if err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, "live.db")
	st, err := bolt.Open(live, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ref string
	if err := st.Update(ctx, func(tx store.Tx) error {
		for e, err := range src.Entries(ctx) {
			if err != nil {
				return err
			}
			ref = e.Ref()
			if err := tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusPending}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	arrived, release := make(chan struct{}, 1), make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/replay" {
			http.NotFound(w, r)
			return
		}
		arrived <- struct{}{}
		<-release
	}))
	defer target.Close()
	h := replay.NewHTTPTarget(target.URL+"/replay", "", 30*time.Second, nil)
	rc := &replay.Reconciler{Engine: eng, Store: st, Actor: "ops", MaxParallel: 1,
		Router: replay.NewRulesRouter(eng.Rules, &replay.Route{Name: "sink", Dispatcher: h})}
	bulkDone := make(chan error, 1)
	go func() {
		_, err := (&replay.Bulk{Reconciler: rc, Inventory: st, Max: 10}).ExecuteReplay(ctx, replay.BulkFilter{All: true})
		bulkDone <- err
	}()
	select {
	case <-arrived:
	case err := <-bulkDone:
		t.Fatalf("the bulk replay ended before dispatching: %v", err)
	}
	killed := filepath.Join(dir, "killed.db")
	data, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(killed, data, 0o600); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-bulkDone; err != nil {
		t.Fatal(err)
	}

	after, err := bolt.Open(killed, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if v, err := after.LedgerView(ctx, "bulk-1"); err != nil || v.State != triage.StateDispatching {
		t.Fatalf("the killed bulk replay's key: %+v %v, want dispatching", v, err)
	}
	if er := entryOf(t, after, ref); er.Status != store.StatusReplaying {
		t.Fatalf("the killed bulk replay's entry is %s, want replaying", er.Status)
	}

	before := runtime.NumGoroutine()
	p, err := NewRecoverer(after, "replayctl-recoverer", Options{Every: time.Hour, Tick: newManualTicks().tick})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s := waitRuns(t, p, 1) // the round at start: no tick needed
	p.Stop()
	goroutinesBack(t, before)
	if s.Errors != 0 {
		t.Fatalf("recovery round failed: %+v", s)
	}
	if v, err := after.LedgerView(ctx, "bulk-1"); err != nil || v.State != triage.StateOutcomeUnknown {
		t.Fatalf("after recovery the key is %+v %v, want outcome_unknown", v, err)
	}
	if er := entryOf(t, after, ref); er.Status != store.StatusUnknown {
		t.Fatalf("after recovery the entry is %s, want %s", er.Status, store.StatusUnknown)
	}
	n := 0
	if err := audit.Each(ctx, after, audit.Query{Kind: audit.KindRecovery}, func(r audit.Record) error {
		if r.Key == "bulk-1" && r.Actor == "replayctl-recoverer" {
			n++
		}
		return nil
	}); err != nil || n != 1 {
		t.Fatalf("%d recovery audit records (%v), want 1", n, err)
	}
}

func entryOf(t *testing.T, st store.Store, ref string) *store.EntryRecord {
	t.Helper()
	var er *store.EntryRecord
	if err := st.View(context.Background(), func(tx store.Tx) error {
		var err error
		er, err = tx.Entry(ref)
		return err
	}); err != nil || er == nil {
		t.Fatalf("entry %s: %v %v", ref, er, err)
	}
	return er
}

// stuckLedger is the real bbolt store whose ledger walk waits until its
// context ends, as a walk of a very large ledger would outlast a stop.
type stuckLedger struct {
	*bolt.Bolt
	entered chan struct{}
}

func (s stuckLedger) LedgerRecords(ctx context.Context, fn func(*idempotency.Record) error) error {
	close(s.entered)
	<-ctx.Done()
	return ctx.Err()
}

// A stop while the recovery sweep walks the ledger cancels the walk and
// returns; the cut-short round is not reported as a failure.
func TestRecovererStopDuringASweepReturns(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "replayctl.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before := runtime.NumGoroutine()
	stuck := stuckLedger{Bolt: st, entered: make(chan struct{})}
	p, err := NewRecoverer(stuck, "replayctl-recoverer", Options{Every: time.Hour, Tick: newManualTicks().tick})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-stuck.entered
	p.Stop()
	if s := p.Status(); s.Running || s.Errors != 0 {
		t.Fatalf("after a stop mid-sweep: %+v", s)
	}
	goroutinesBack(t, before)
}
