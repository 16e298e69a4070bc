package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testsvc.Stop()
	os.Exit(code)
}

// sharedBundle is a bundle whose state is in PostgreSQL.
func sharedBundle(t *testing.T) (*testBundle, *postgres.Postgres) {
	b := newBundle(t, baseRules)
	pg, err := postgres.Open(context.Background(), testsvc.Postgres(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	return b, pg
}

func (b *testBundle) worker(pg *postgres.Postgres, name string) *Reconciler {
	r := b.reconciler(4)
	r.Store, r.Owner, r.Clock = pg, name, SystemClock{}
	return r
}

func TestWorkersShareOneDLQThroughPostgres(t *testing.T) {
	b, pg := sharedBundle(t)
	var entries []map[string]any
	for i := range 200 {
		entries = append(entries, transient(fmt.Sprintf("e%03d", i), fmt.Sprintf("k%03d", i)))
	}
	for i := range 20 {
		entries = append(entries, map[string]any{"id": fmt.Sprintf("p%02d", i), "reason_code": "schema_invalid", "idempotency_key": fmt.Sprintf("p%02d", i)})
	}
	src := b.jsonl("dlq.jsonl", entries...)
	var wg sync.WaitGroup
	reps := make([]*Report, 3)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := b.worker(pg, fmt.Sprintf("w%d", w)).Run(context.Background(), []source.Source{src})
			if err != nil {
				t.Error(err)
			}
			reps[w] = rep
		}()
	}
	wg.Wait()
	got := b.sink.perKey()
	if len(got) != 200 {
		t.Fatalf("%d keys delivered, want 200", len(got))
	}
	for k, n := range got {
		if n != 1 {
			t.Errorf("key %s delivered %d times", k, n)
		}
	}
	ingested, handled := 0, 0
	for _, r := range reps {
		ingested += r.Ingested
		handled += r.Summary.Total
	}
	if ingested != len(entries) || handled < len(entries) {
		t.Fatalf("ingested %d handled %d of %d", ingested, handled, len(entries))
	}
	ctx := context.Background()
	n := 0
	_ = pg.Entries(ctx, func(er *store.EntryRecord) error {
		n++
		if er.LastDecision == 0 {
			t.Errorf("%s never decided", er.Entry.Ref())
		}
		if owner, _, _, _ := pg.LeaseHolder(ctx, er.Entry.Ref()); owner != "" {
			t.Errorf("%s still leased to %s", er.Entry.Ref(), owner)
		}
		return nil
	})
	if n != len(entries) {
		t.Fatalf("%d entries stored", n)
	}
}

func TestStaleFencingTokenIsRejected(t *testing.T) {
	_, pg := sharedBundle(t)
	ctx := context.Background()
	rec := &store.EntryRecord{Status: store.StatusPending}
	rec.Entry.ID, rec.Entry.Source = "e1", "jsonl"
	rec.Entry.EnsureKey()
	if _, err := pg.Ingest(ctx, []*store.EntryRecord{rec}); err != nil {
		t.Fatal(err)
	}
	since, _ := pg.Now(ctx)
	since = since.Add(time.Second)
	a, err := pg.Claim(ctx, "worker-a", since, 1, 20*time.Millisecond)
	if err != nil || len(a) != 1 {
		t.Fatalf("claim a: %v %v", a, err)
	}
	// Worker A pauses past its lease; worker B takes the entry over.
	time.Sleep(50 * time.Millisecond)
	bc, err := pg.Claim(ctx, "worker-b", since, 1, time.Minute)
	if err != nil || len(bc) != 1 || bc[0].Token <= a[0].Token {
		t.Fatalf("claim b: %v %v", bc, err)
	}
	write := func(token int64) error {
		fctx := store.WithFence(ctx, store.Fence{Ref: "jsonl:e1", Token: token})
		return pg.Update(fctx, func(tx store.Tx) error {
			_, err := tx.Transition(idempotency.Transition{Key: rec.Entry.IdempotencyKey, To: idempotency.Decided})
			return err
		})
	}
	if err := write(a[0].Token); !errors.Is(err, store.ErrStaleFence) {
		t.Fatalf("A's stale token: %v", err)
	}
	if err := write(bc[0].Token); err != nil {
		t.Fatalf("B's current token: %v", err)
	}
	// A's release does not free B's lease.
	if err := pg.Release(ctx, "jsonl:e1", a[0].Token); err != nil {
		t.Fatal(err)
	}
	if owner, _, _, _ := pg.LeaseHolder(ctx, "jsonl:e1"); owner != "worker-b" {
		t.Fatalf("lease holder %q", owner)
	}
}

func TestDeadWorkersDispatchBecomesOutcomeUnknown(t *testing.T) {
	b, pg := sharedBundle(t)
	ctx := context.Background()
	src := b.jsonl("dlq.jsonl", transient("e1", "k1"))
	// A worker claims the entry, writes its intent, and dies.
	rec := &store.EntryRecord{Status: store.StatusPending}
	for e := range src.Entries(ctx) {
		rec.Entry = e
	}
	if _, err := pg.Ingest(ctx, []*store.EntryRecord{rec}); err != nil {
		t.Fatal(err)
	}
	since, _ := pg.Now(ctx)
	c, err := pg.Claim(ctx, "dead", since.Add(time.Second), 1, 20*time.Millisecond)
	if err != nil || len(c) != 1 {
		t.Fatal(c, err)
	}
	fctx := store.WithFence(ctx, store.Fence{Ref: "jsonl:e1", Token: c[0].Token})
	if err := pg.Update(fctx, func(tx store.Tx) error {
		if _, err := tx.Transition(idempotency.Transition{Key: "k1", To: idempotency.Decided, EntryRef: "jsonl:e1"}); err != nil {
			return err
		}
		_, err := tx.Transition(idempotency.Transition{Key: "k1", From: idempotency.Decided, To: idempotency.Dispatching})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the lease runs out
	rep, err := b.worker(pg, "alive").Run(ctx, []source.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := pg.LedgerView(ctx, "k1"); v.State != string(idempotency.OutcomeUnknown) {
		t.Fatalf("ledger %+v", v)
	}
	if n := len(b.sink.deliveries()); n != 0 {
		t.Fatalf("blind retry: %d deliveries (report %+v)", n, rep.Replays)
	}
}

// A run cannot take entries that another worker's live lease holds (a
// worker killed mid-run holds its claims until the lease ends); the report
// says how many and until when, where it said nothing and counted fewer
// entries than the source had (found in the incident drills: 290 of 300).
func TestRunReportsEntriesHeldByAnotherWorkersLease(t *testing.T) {
	b, pg := sharedBundle(t)
	ctx := context.Background()
	src := b.jsonl("dlq.jsonl", transient("e1", "k1"), transient("e2", "k2"), transient("e3", "k3"))
	var recs []*store.EntryRecord
	for e := range src.Entries(ctx) {
		recs = append(recs, &store.EntryRecord{Entry: e, Status: store.StatusPending})
	}
	if _, err := pg.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	now, _ := pg.Now(ctx)
	held, err := pg.Claim(ctx, "dead", now.Add(time.Second), 2, time.Hour)
	if err != nil || len(held) != 2 {
		t.Fatal(held, err)
	}
	rep, err := b.worker(pg, "alive").Run(ctx, []source.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replays.Succeeded != 1 || rep.HeldElsewhere != 2 {
		t.Fatalf("succeeded %d, held elsewhere %d; want 1 and 2 (%+v)", rep.Replays.Succeeded, rep.HeldElsewhere, rep)
	}
	if d := rep.HeldUntil.Sub(now); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("held until %v, %v after the claim; want the dead worker's lease end, ~1h", rep.HeldUntil, d)
	}
	// Once the lease is free again (the dead worker's entries released,
	// as an expired lease is), a run takes them and holds nothing back.
	for _, c := range held {
		if err := pg.Release(ctx, c.Entry.Entry.Ref(), c.Token); err != nil {
			t.Fatal(err)
		}
	}
	rep, err = b.worker(pg, "alive").Run(ctx, []source.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	if rep.HeldElsewhere != 0 || !rep.HeldUntil.IsZero() {
		t.Fatalf("held elsewhere %d until %v after the release", rep.HeldElsewhere, rep.HeldUntil)
	}
}
