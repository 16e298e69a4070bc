package replay

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/runs"
	"github.com/replayctl/replayctl/internal/store"
)

// Issue 15, the cancel test: a 5,000-entry redrive cancelled mid-way (as
// the API cancels a run of its process, while a dispatch is in flight;
// the stored cancel of another process is proven in internal/runs) leaves
// no dispatch unrecorded: the in-flight one records its
// outcome, no key stays dispatching, every dispatch record has its outcome
// record. The resumed redrive delivers every other key, and no key twice
// (counted per key at a real httptest sink).
func TestCancelledRedriveLeavesNothingUnrecordedAndResumesWithoutDuplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("400 entries")
	}
	// Each dispatch is fsynced: a run of its own files, beside the others.
	t.Parallel()
	// 5 workers, the CLI's default: up to 5 dispatches are in flight when
	// the cancel lands, and each records its outcome. 400 entries are 7
	// windows of the runner (64 entries each): the cancel lands inside the
	// third window, not at its edge (150 = 2*64 + 22), and the resumed
	// redrive crosses four more, which is all the property needs. 5,000
	// took 209 s of make test's run on the shared 2-core machine
	// (fsync-bound: 94 s of CPU for the package), 1,000 took 9.4 s of CPU.
	const total, cancelAt, par = 400, 150, 5
	b := newBundle(t, baseRules)
	ctx := context.Background()
	entries := make([]map[string]any, total)
	for i := range entries {
		entries[i] = transient(fmt.Sprintf("c%04d", i), fmt.Sprintf("ck%04d", i))
	}
	ingest := b.reconciler(4)
	ingest.Router = NewRulesRouter(b.engine.Rules, nil) // the outage: nowhere to send
	b.run(ingest, b.jsonl("dlq.jsonl", entries...))

	// The run, and a cancel stored from elsewhere when the cancelAt-th
	// dispatch has reached the target and not yet been answered.
	var current atomic.Pointer[runs.Tracker]
	var seen atomic.Int64
	b.sink.status = func(string, int) int {
		if seen.Add(1) == cancelAt {
			current.Load().Cancel("bob")
		}
		return 200
	}
	redrive := func() (*BulkReport, runs.Record) {
		t.Helper()
		tr, runCtx, err := runs.Start(ctx, b.store, runs.Options{Op: "bulk-replay", Actor: "alice", Now: b.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		current.Store(tr)
		bk := b.bulk(0, 0)
		bk.Reconciler.MaxParallel = par
		bk.Run = tr
		rep, err := bk.ExecuteReplay(runCtx, BulkFilter{Classes: []string{"transient"}})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := tr.Finish(ctx, runCtx.Err())
		if err != nil {
			t.Fatal(err)
		}
		return rep, rec
	}
	noneUnrecorded := func(wantDispatches int) {
		t.Helper()
		dispatching := 0
		_ = b.store.LedgerRecords(ctx, func(r *idempotency.Record) error {
			if r.State == idempotency.Dispatching {
				dispatching++
			}
			return nil
		})
		var dispatches, outcomes int
		_ = audit.Each(ctx, b.store, audit.Query{}, func(r audit.Record) error {
			switch r.Kind {
			case audit.KindDispatch:
				dispatches++
			case audit.KindOutcome:
				outcomes++
			}
			return nil
		})
		if dispatching != 0 || dispatches != wantDispatches || outcomes != dispatches {
			t.Fatalf("%d keys left dispatching; %d dispatch records, %d outcome records (want %d each)",
				dispatching, dispatches, outcomes, wantDispatches)
		}
	}

	rep, rec := redrive()
	got := len(b.sink.perKey())
	if rec.State != runs.Cancelled || rec.CancelledBy != "bob" || rec.Total != total {
		t.Fatalf("run: %+v", rec)
	}
	// Cancelled during the cancelAt-th dispatch: it and the others in
	// flight finished and were recorded (and counted), no later one started.
	if got < cancelAt || got > cancelAt+par-1 || rep.Replays["succeeded"] != got || rep.Done != got || rec.Done != got ||
		rec.Succeeded != got || rep.Stopped == "" {
		t.Fatalf("cancelled run: %d keys delivered, report done %d replays %v stopped %q, run %+v",
			got, rep.Done, rep.Replays, rep.Stopped, rec)
	}
	noneUnrecorded(got)

	// Resume: the same redrive again sends the rest, nothing twice.
	rep, rec = redrive()
	if rec.State != runs.Succeeded || rep.Replays["succeeded"] != total-got || rep.Why[WhyCommitted] != got {
		t.Fatalf("resumed: %s, replays %v, why %v", rec.State, rep.Replays, rep.Why)
	}
	perKey := b.sink.perKey()
	if len(perKey) != total {
		t.Fatalf("%d keys delivered, want %d", len(perKey), total)
	}
	for k, n := range perKey {
		if n != 1 {
			t.Fatalf("key %s delivered %d times", k, n)
		}
	}
	noneUnrecorded(total)
}

// cancellingRouter cancels the run the first time it routes entry id
// after the sink got a delivery: a cancel landing between an entry's
// planning and its store calls.
type cancellingRouter struct {
	Router
	id     string
	sink   *sink
	cancel context.CancelFunc
}

func (c *cancellingRouter) Route(e *entry.Entry) (Route, bool) {
	if e.ID == c.id && len(c.sink.deliveries()) == 1 {
		c.cancel()
	}
	return c.Router.Route(e)
}

// A cancel can land while an entry is being decided, not only between
// entries: the redrive stops (recorded as stopped, resumable), it does not
// fail with "context canceled" and lose its finished record.
func TestRedriveCancelledMidEntryStopsCleanly(t *testing.T) {
	b := newBundle(t, baseRules)
	ctx := context.Background()
	ingest := b.reconciler(1)
	ingest.Router = NewRulesRouter(b.engine.Rules, nil)
	b.run(ingest, b.jsonl("dlq.jsonl", transient("t1", "k1"), transient("t2", "k2"), transient("t3", "k3")))

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	bk := b.bulk(0, 0)
	bk.Reconciler.Router = &cancellingRouter{Router: bk.Reconciler.Router, id: "t2", sink: b.sink, cancel: cancel}
	rep, err := bk.ExecuteReplay(runCtx, BulkFilter{Classes: []string{"transient"}})
	if err != nil {
		t.Fatalf("a cancel mid-entry failed the redrive: %v", err)
	}
	if rep.Stopped == "" || rep.Done != 1 || len(b.sink.deliveries()) != 1 {
		t.Fatalf("stopped %q, done %d, delivered %d, items %+v replays %v", rep.Stopped, rep.Done, len(b.sink.deliveries()), rep.Items, rep.Replays)
	}
	var phase string
	_ = audit.Each(ctx, b.store, audit.Query{Kind: audit.KindBulk}, func(r audit.Record) error {
		phase = r.Outcome
		return nil
	})
	if phase != "replay stopped" {
		t.Fatalf("last bulk record %q, want the stopped record", phase)
	}
	// Resumed: the other two, nothing twice.
	if _, err := b.bulk(0, 0).ExecuteReplay(ctx, BulkFilter{Classes: []string{"transient"}}); err != nil {
		t.Fatal(err)
	}
	if pk := b.sink.perKey(); len(pk) != 3 || pk["k1"] != 1 || pk["k2"] != 1 || pk["k3"] != 1 {
		t.Fatalf("after resume: %v", pk)
	}
}

// The same one at a time (--spread, or --max-parallel 1), where the count
// is exact: the cancelAt-th dispatch is recorded, none after starts; the
// resumed redrive sends each other key once and matches its preview entry
// by entry.
func TestSequentialRedriveCancelAndResume(t *testing.T) {
	t.Parallel() // fsync-bound, its own files
	// 400 entries, as in the test above: the cancel inside the third of 7
	// windows (1,000 took 9.5 s of CPU and most of a minute of wall clock).
	const total, cancelAt, par = 400, 150, 1
	b := newBundle(t, baseRules)
	ctx := context.Background()
	entries := make([]map[string]any, total)
	for i := range entries {
		entries[i] = transient(fmt.Sprintf("p%04d", i), fmt.Sprintf("pk%04d", i))
	}
	ingest := b.reconciler(4)
	ingest.Router = NewRulesRouter(b.engine.Rules, nil)
	b.run(ingest, b.jsonl("dlq.jsonl", entries...))

	var current atomic.Pointer[runs.Tracker]
	var seen atomic.Int64
	b.sink.status = func(string, int) int {
		if seen.Add(1) == cancelAt {
			current.Load().Cancel("bob")
		}
		return 200
	}
	f := BulkFilter{Classes: []string{"transient"}}
	redrive := func() (*BulkReport, runs.Record) {
		t.Helper()
		tr, runCtx, err := runs.Start(ctx, b.store, runs.Options{Op: "bulk-replay", Actor: "alice", Now: b.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		current.Store(tr)
		bk := b.bulk(0, 0)
		bk.Reconciler.MaxParallel = par
		bk.Run = tr
		rep, err := bk.ExecuteReplay(runCtx, f)
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := tr.Finish(ctx, runCtx.Err())
		return rep, rec
	}
	rep, rec := redrive()
	got := len(b.sink.perKey())
	if rec.State != runs.Cancelled || got != cancelAt ||
		rep.Replays["succeeded"] != got || rep.Done != got || rec.Succeeded != got {
		t.Fatalf("cancelled: %d delivered, report done %d replays %v, run %+v", got, rep.Done, rep.Replays, rec)
	}
	dispatching := 0
	_ = b.store.LedgerRecords(ctx, func(r *idempotency.Record) error {
		if r.State == idempotency.Dispatching {
			dispatching++
		}
		return nil
	})
	if dispatching != 0 {
		t.Fatalf("%d keys left dispatching", dispatching)
	}
	if er := b.entry(fmt.Sprintf("jsonl:p%04d", cancelAt-1)); er.Status != store.StatusReplayed {
		t.Fatalf("the in-flight entry: %s %q", er.Status, er.Reason)
	}
	preview, err := b.bulk(0, 0).PreviewReplay(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	rep, rec = redrive()
	if rec.State != runs.Succeeded || rep.Replays["succeeded"] != total-got {
		t.Fatalf("resumed: %s %v", rec.State, rep.Replays)
	}
	for i, it := range rep.Items {
		if p := preview.Items[i]; p.Ref != it.Ref || p.Category != it.Category {
			t.Fatalf("item %d: preview %+v, execution %+v", i, p, it)
		}
	}
	pk := b.sink.perKey()
	if len(pk) != total {
		t.Fatalf("%d keys delivered", len(pk))
	}
	for k, n := range pk {
		if n != 1 {
			t.Fatalf("key %s delivered %d times", k, n)
		}
	}
}
