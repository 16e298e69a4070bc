package replay

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// bundledRules is the rules.yaml replayctl ships: its
// max_scheduling_retries rule sets max_replays: 2.
func bundledRules(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// liveRun runs one reconcile of the live source src, replaying through the
// system's own endpoint.
func liveRun(t *testing.T, b *testBundle, st Store, src source.Source) *Report {
	t.Helper()
	lr := NewOriginRouter(NewRulesRouter(b.engine.Rules, nil), false, CredentialsFromEnv(os.Getenv))
	return b.run(&Reconciler{Engine: b.engine, Store: st, Clock: b.clock, Actor: "ops-bot", MaxParallel: 2, Router: lr}, src)
}

// lineageStore is what the lineage tests need of a backend.
type lineageStore interface {
	Store
	Inventory
}

func storedEntry(t *testing.T, st store.Store, ref string) *store.EntryRecord {
	t.Helper()
	var er *store.EntryRecord
	if err := st.View(context.Background(), func(tx store.Tx) error {
		var err error
		er, err = tx.Entry(ref)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return er
}

// TestCordumRetryChainStopsAtMaxReplays: a Cordum job that keeps failing
// comes back after each retry as a new job <id>-retry-<8hex>
// (finmaster1/cordum gateway/handlers_dlq.go:157, scheduler
// engine.go:3066-3085 at e00450ed). Counted per key, each came back with a
// fresh budget: 5 runs made 5 retries under the bundled rule's
// max_replays: 2. Counted across the lineage, the third job waits for a
// person, `dlq show`'s chain lists all three, and releasing the lineage's
// budget (audited) lets the next run retry it once more.
func TestCordumRetryChainStopsAtMaxReplays(t *testing.T) {
	b := newBundle(t, bundledRules(t))
	cordumChainStops(t, b, b.store)
}

// TestCordumRetryChainStopsAtMaxReplaysPostgres: the same on the shared
// store: the lineage count is read from PostgreSQL.
func TestCordumRetryChainStopsAtMaxReplaysPostgres(t *testing.T) {
	b := newBundle(t, bundledRules(t))
	pg, err := postgres.Open(context.Background(), testsvc.Postgres(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	cordumChainStops(t, b, pg)
}

func cordumChainStops(t *testing.T, b *testBundle, st lineageStore) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	f := newFakeCordum(t, "job_l")
	f.Requeue, f.ReasonCode = true, "max_scheduling_retries"
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		liveRun(t, b, st, src)
	}
	f.Mu.Lock()
	retried, inDLQ := 0, []string{}
	for _, n := range f.Retries {
		retried += n
	}
	for id := range f.DLQ {
		inDLQ = append(inDLQ, id)
	}
	f.Mu.Unlock()
	if retried != 2 {
		t.Fatalf("%d retries through Cordum in 5 runs, want 2 (max_replays across the lineage)", retried)
	}
	if len(inDLQ) != 1 || strings.Count(inDLQ[0], "-retry-") != 2 {
		t.Fatalf("Cordum's DLQ holds %v, want the second retry's job", inDLQ)
	}
	last := storedEntry(t, st, "cordum:"+inDLQ[0])
	if last.Status != store.StatusManualReview || !strings.Contains(last.Reason, "max_replays reached across lineage cordum:job_l (2 of 2)") {
		t.Fatalf("last job: %s %q", last.Status, last.Reason)
	}
	chain, err := Lineage(context.Background(), st, last)
	if err != nil {
		t.Fatal(err)
	}
	if chain.Root != "cordum:job_l" || len(chain.Members) != 3 || chain.Used != 2 ||
		chain.Members[0].Ref != "cordum:job_l" || chain.Members[2].Ref != last.Entry.Ref() {
		t.Fatalf("chain %+v (%s)", chain, chain)
	}

	// A person releases the lineage's budget: audited, and the next run
	// retries the job once more.
	if _, err := ReleaseLineage(context.Background(), st, inDLQ[0], "alice", "", b.clock.Now()); err == nil {
		t.Fatal("release without a reason accepted")
	}
	chain, err = ReleaseLineage(context.Background(), st, inDLQ[0], "alice", "pool resized", b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if chain.Used != 0 || chain.Released != 2 || chain.ReleasedBy != "alice" {
		t.Fatalf("after release: %+v", chain)
	}
	found := false
	if err := audit.Each(context.Background(), st, audit.Query{}, func(r audit.Record) error {
		if r.Kind == audit.KindRelease && r.Outcome == "lineage_released" && r.Actor == "alice" &&
			strings.Contains(r.Reason, "pool resized") && r.EntryRef == last.Entry.Ref() {
			found = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Error("the lineage release has no audit record")
	}
	liveRun(t, b, st, src)
	if n := f.Calls(inDLQ[0]); n != 1 {
		t.Errorf("after the release: %d retries of %s, want 1", n, inDLQ[0])
	}
	liveRun(t, b, st, src)
	f.Mu.Lock()
	retried = 0
	for _, n := range f.Retries {
		retried += n
	}
	f.Mu.Unlock()
	if retried != 4 {
		t.Errorf("%d retries in all, want 4: two more after the release", retried)
	}
}

// TestNexoraReplayChainStopsAtMaxReplays: each Nexora replay submits a new
// execution of the same goal and context (ObserveCommand.java:197-201,
// ExecutionEngine.java:145-158 at 8ef2c3ea) whose failure is a new record
// with a new UUID. Linked by goal and context, the records share one
// budget: under max_replays 2, five runs replay twice.
func TestNexoraReplayChainStopsAtMaxReplays(t *testing.T) {
	t.Setenv("NEXORA_TOKEN", testNexoraTok)
	b := newBundle(t, "version: v1\ndefaults: {max_replays: 2}\ntaxonomy: {transient: [step_failed]}\n")
	f := newFakeNexora(t, map[string]string{"dl-1": "PENDING"})
	f.Requeue = true
	src, err := source.Parse("nexora:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		liveRun(t, b, b.store, src)
	}
	f.Mu.Lock()
	replayed := 0
	for _, n := range f.Replays {
		replayed += n
	}
	f.Mu.Unlock()
	if replayed != 2 {
		t.Fatalf("%d replays through Nexora in 5 runs, want 2", replayed)
	}
	er := b.entry("nexora:dl-1-r-r")
	if er == nil || er.Status != store.StatusManualReview || !strings.Contains(er.Reason, "max_replays reached across lineage nexora:goal+context:") {
		t.Fatalf("third record: %+v", er)
	}
}

// TestLineageStampLinksAMessageThatComesBack: every replay carries the
// replayctl-lineage stamp (a header, for a target that keeps them); a
// message that is dead-lettered again with it among its labels (as a
// connector that keeps headers reads it) belongs to the lineage of the
// entry it came from, and max_replays counts across both.
func TestLineageStampLinksAMessageThatComesBack(t *testing.T) {
	b := newBundle(t, "version: v1\ndefaults: {max_replays: 1}\n")
	b.run(b.reconciler(2), b.jsonl("first.jsonl", transient("m1", "k-m1")))
	got := b.sink.deliveries()
	if len(got) != 1 || got[0].Lineage != "jsonl:m1" {
		t.Fatalf("deliveries %+v, want one stamped with lineage jsonl:m1", got)
	}
	back := transient("m2", "k-m2")
	back["labels"] = map[string]string{"replayctl-lineage": got[0].Lineage}
	other := transient("m3", "k-m3")
	b.run(b.reconciler(2), b.jsonl("second.jsonl", back, other))
	if n := len(b.sink.deliveries()); n != 2 {
		t.Errorf("%d deliveries, want 2: m3 (a lineage of its own) but not m2", n)
	}
	if er := b.entry("jsonl:m2"); er.Status != store.StatusManualReview || !strings.Contains(er.Reason, "max_replays reached across lineage jsonl:m1 (1 of 1)") {
		t.Errorf("m2: %s %q", er.Status, er.Reason)
	}
}
