package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// Issue 16, the next cost per replay after the entry counters: a worker
// read the ledger row of its claimed entry's key twice and the entry once
// before deciding, each read a round trip. Under a fence whose key is
// known the first read fetches both rows in one round trip and serves the
// next read of each from it, once; a write under the fence (and the
// claim's release) drops what was kept, so later reads go to the
// database and see the write.
func TestPostgresReadsAheadUnderAClaim(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	p.stopSealer()
	p.stopSealer = nil
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	r := mixedEntry(1, base)
	r.Entry.IdempotencyKey = "key-1"
	if _, err := p.Ingest(ctx, []*store.EntryRecord{r}); err != nil {
		t.Fatal(err)
	}
	claims, err := p.Claim(ctx, "w", base.Add(time.Hour), 1, time.Minute)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v, %v", claims, err)
	}
	f := store.Fence{Ref: r.Entry.Ref(), Token: claims[0].Token, Key: "key-1"}
	fctx := store.WithFence(ctx, f)
	trips := func(fn func(store.Tx) error) int64 {
		t.Helper()
		before := p.Trips().RoundTrips
		if err := p.View(fctx, fn); err != nil {
			t.Fatal(err)
		}
		return p.Trips().RoundTrips - before
	}
	ledger := func(want idempotency.State) func(store.Tx) error {
		return func(tx store.Tx) error {
			rec, err := tx.Ledger("key-1")
			if err != nil {
				return err
			}
			got := idempotency.State("")
			if rec != nil {
				got = rec.State
			}
			if got != want {
				t.Errorf("ledger key-1 is %q, want %q", got, want)
			}
			return nil
		}
	}
	entry := func(want string) func(store.Tx) error {
		return func(tx store.Tx) error {
			er, err := tx.Entry(r.Entry.Ref())
			if err != nil {
				return err
			}
			if er == nil || er.Status != want || string(er.Entry.Payload) != `{"n":1}` {
				t.Errorf("entry: %+v, want status %s", er, want)
			}
			return nil
		}
	}
	statements := p.Trips().Statements
	if n := trips(ledger("")); n != 1 {
		t.Errorf("first ledger read: %d round trips, want 1", n)
	}
	if n := p.Trips().Statements - statements; n != 1 {
		t.Errorf("first ledger read: %d statements, want 1 (the ledger row and the entry together)", n)
	}
	if n := trips(ledger("")); n != 0 {
		t.Errorf("second ledger read: %d round trips, want 0 (read ahead)", n)
	}
	if n := trips(entry(store.StatusPending)); n != 0 {
		t.Errorf("entry read: %d round trips, want 0 (read ahead)", n)
	}
	if n := trips(entry(store.StatusPending)); n != 1 {
		t.Errorf("second entry read: %d round trips, want 1 (served once)", n)
	}

	// Read ahead, then written under the fence: the reads see the write.
	trips(ledger(""))
	if err := p.Update(fctx, func(tx store.Tx) error {
		if _, err := tx.Transition(idempotency.Transition{Key: "key-1", From: idempotency.None, To: idempotency.Decided, EntryRef: r.Entry.Ref()}); err != nil {
			return err
		}
		er, err := tx.Entry(r.Entry.Ref())
		if err != nil {
			return err
		}
		er.Status = store.StatusReplaying
		return tx.PutEntry(er)
	}); err != nil {
		t.Fatal(err)
	}
	if n := trips(entry(store.StatusReplaying)); n != 1 {
		t.Errorf("entry read after a write: %d round trips, want 1", n)
	}
	if n := trips(ledger(idempotency.Decided)); n != 1 {
		t.Errorf("ledger read after a write: %d round trips, want 1", n)
	}
	// Released: nothing kept is served.
	p.ReleaseLater(r.Entry.Ref(), f.Token)
	if n := trips(entry(store.StatusReplaying)); n != 1 {
		t.Errorf("entry read after the release: %d round trips, want 1", n)
	}
	// Under a fence of an entry that is not stored (nor its key): both
	// read ahead as none.
	none := store.WithFence(ctx, store.Fence{Ref: "jsonl:none", Token: f.Token + 1000, Key: "key-none"})
	statements = p.Trips().Statements
	if err := p.View(none, func(tx store.Tx) error {
		rec, err := tx.Ledger("key-none")
		if err != nil || rec != nil {
			t.Errorf("ledger of a key not stored: %+v, %v", rec, err)
		}
		er, err := tx.Entry("jsonl:none")
		if err != nil || er != nil {
			t.Errorf("entry not stored: %+v, %v", er, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := p.Trips().Statements - statements; n != 1 {
		t.Errorf("reads under the fence of an entry not stored: %d statements, want 1", n)
	}
	// Without a fence every read is its own.
	before := p.Trips().RoundTrips
	for range 2 {
		if err := p.View(ctx, ledger(idempotency.Decided)); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.Trips().RoundTrips - before; n != 2 {
		t.Errorf("unfenced ledger reads: %d round trips, want 2", n)
	}
}
