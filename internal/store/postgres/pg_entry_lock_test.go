package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// Two people change one entry at once on PostgreSQL (an operator resolves
// it while an approver re-requests it, or a worker decides it): each
// reads the entry, changes it and writes it back in one Update. bbolt
// runs one writer at a time; on PostgreSQL the read must lock the row,
// or a writer acts on a read another writer has made stale and the other
// change is lost (the last write wins). Here the first writer reads and
// then waits until the second has either finished (no lock: the bug) or
// is seen waiting on a lock (the row is locked), and only then writes.
func TestPostgresEntryReadModifyWriteLosesNoChange(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	first, second := openPG(t, dsn, store.Options{}), openPG(t, dsn, store.Options{})
	const ref = "jsonl:e1"
	if err := first.Update(ctx, func(tx store.Tx) error {
		return tx.PutEntry(&store.EntryRecord{Entry: entry.Entry{ID: "e1", Source: "jsonl", IdempotencyKey: "k1",
			Labels: map[string]string{}}, Status: store.StatusPending})
	}); err != nil {
		t.Fatal(err)
	}
	label := func(tx store.Tx, k string) error {
		er, err := tx.Entry(ref)
		if err != nil || er == nil {
			t.Errorf("entry %s: %v", ref, err)
			return err
		}
		if er.Entry.Labels == nil {
			er.Entry.Labels = map[string]string{}
		}
		er.Entry.Labels[k] = "set"
		return tx.PutEntry(er)
	}

	read := make(chan struct{})
	var readOnce sync.Once
	secondDone := make(chan struct{})
	firstErr := make(chan error, 1)
	go func() {
		firstErr <- first.Update(ctx, func(tx store.Tx) error {
			er, err := tx.Entry(ref)
			if err != nil || er == nil {
				return err
			}
			readOnce.Do(func() { close(read) })
			waitForSecond(t, first, secondDone)
			if er.Entry.Labels == nil {
				er.Entry.Labels = map[string]string{}
			}
			er.Entry.Labels["first"] = "set"
			return tx.PutEntry(er)
		})
	}()
	<-read
	err := second.Update(ctx, func(tx store.Tx) error { return label(tx, "second") })
	close(secondDone)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-firstErr; err != nil {
		t.Fatal(err)
	}
	var got *store.EntryRecord
	if err := first.View(ctx, func(tx store.Tx) (err error) {
		got, err = tx.Entry(ref)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got.Entry.Labels["first"] != "set" || got.Entry.Labels["second"] != "set" {
		t.Fatalf("labels after two concurrent changes: %v, want both first and second", got.Entry.Labels)
	}
}

// waitForSecond returns once done is closed or some session waits on a
// row lock, whichever comes first (it polls the server's activity view).
func waitForSecond(t *testing.T, p *Postgres, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
		}
		var waiting int
		if err := p.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Errorf("pg_stat_activity: %v", err)
			return
		}
		if waiting > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A person's change of N entries in one transaction reads each entry once:
// the locked read keeps the row's counted keys for the write, which before
// read the row again (2N round trips plus COMMIT; now N plus COMMIT), and
// the counters still equal a recount.
func TestPostgresEntryChangeReadsEachRowOnce(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	const n = 5
	var recs []*store.EntryRecord
	for i := range n {
		recs = append(recs, mixedEntry(i, base))
	}
	if _, err := p.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	before := p.Trips()
	if err := p.Update(ctx, func(tx store.Tx) error {
		for _, r := range recs[:n-2] { // two stay open
			er, err := tx.Entry(r.Entry.Ref())
			if err != nil || er == nil {
				return fmt.Errorf("read %s: %v", r.Entry.Ref(), err)
			}
			er.Status, er.Hold, er.Reason = store.StatusResolved, store.HoldResolved, "handled by hand"
			if err := tx.PutEntry(er); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	after := p.Trips()
	if changed, trips := n-2, after.RoundTrips-before.RoundTrips; trips > int64(changed)+2 {
		t.Errorf("changing %d entries took %d round trips, want at most %d (a read each, the settings, COMMIT)", changed, trips, changed+2)
	}
	assertCountersEqualRecount(t, p, base, base.Add(48*time.Hour))
}
