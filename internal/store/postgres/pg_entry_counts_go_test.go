package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

// entryCounters are the entry counters of p (Counters without the
// decision counters, which pg_counts_test.go checks).
func entryCounters(t *testing.T, p *Postgres) *store.Counters {
	t.Helper()
	c, err := p.Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.Decisions, c.Denied, c.Outcomes = 0, 0, nil
	return c
}

func assertCountersEqualRecount(t *testing.T, p *Postgres, from, to time.Time) {
	t.Helper()
	want, wantHours := recountEntries(t, p, from, to)
	if got := entryCounters(t, p); !reflect.DeepEqual(got, want) {
		t.Errorf("counters:\n%+v\nrecount:\n%+v", got, want)
	}
	series, err := p.Series(context.Background(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	gotHours := inflowHours(series)
	if !reflect.DeepEqual(gotHours, wantHours) {
		t.Errorf("series inflow: %+v\nrecount: %+v", gotHours, wantHours)
	}
}

// Schema version 9 counts entries in Go, from the row each transaction
// read locked. Three workers (three pools, as three processes) ingest
// overlapping batches at once, claim entries and move them between cells
// under their fences (as shared.go does), and create the same new entries
// without a fence (the second creator of each loses the insert race and
// runs again); the counters end equal to a recount.
func TestPostgresEntryCountsFromSeveralWorkers(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	ps := []*Postgres{openPG(t, dsn, store.Options{}), openPG(t, dsn, store.Options{}), openPG(t, dsn, store.Options{})}
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	const n = 180
	recs := make([]*store.EntryRecord, n)
	for i := range recs {
		recs[i] = mixedEntry(i, base)
	}
	var wg sync.WaitGroup
	ingested := make([]int, len(ps))
	for w, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Overlapping halves, in different orders.
			for lo := (w * n / 3) % n; lo < n; lo += 30 {
				got, err := p.Ingest(ctx, recs[lo:min(lo+60, n)])
				if err != nil {
					t.Error(err)
					return
				}
				ingested[w] += got
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if total := ingested[0] + ingested[1] + ingested[2]; total != n {
		t.Fatalf("workers ingested %v entries, want %d in all", ingested, n)
	}
	assertCountersEqualRecount(t, ps[0], base, base.Add(48*time.Hour))

	for w, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", w)
			for round := 0; ; round++ {
				claims, err := p.Claim(ctx, owner, base.Add(time.Hour), 4, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if len(claims) == 0 {
					return
				}
				for k, c := range claims {
					fctx := store.WithFence(ctx, store.Fence{Ref: c.Entry.Entry.Ref(), Token: c.Token})
					err := p.Update(fctx, func(tx store.Tx) error {
						r, err := tx.Entry(c.Entry.Entry.Ref())
						if err != nil || r == nil {
							return fmt.Errorf("read claimed %s: %v", c.Entry.Entry.Ref(), err)
						}
						switch (round + k + w) % 4 {
						case 0:
							r.Status = store.StatusReplayed
						case 1:
							r.Status, r.Class, r.Action = store.StatusQuarantined, triage.Poison, triage.Quarantine
						case 2:
							r.Reason = "only the reason"
						case 3:
							r.Entry.Payload = json.RawMessage(`{"n":2}`) // a new payload: the other UPDATE
							r.Entry.Topic = "moved"
						}
						if err := tx.PutEntry(r); err != nil {
							return err
						}
						// A second write of the same entry counts from the first.
						r.Status = store.StatusReplaying
						if (round+k)%3 == 0 {
							return tx.PutEntry(r)
						}
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
					if err := p.Release(ctx, c.Entry.Entry.Ref(), c.Token); err != nil {
						t.Error(err)
						return
					}
				}
				if round >= 8 {
					continue
				}
				// Entries no worker claimed, created by every worker: each
				// is inserted once and counted once (and claimed later).
				extra := mixedEntry(n+round, base)
				extra.Status = store.StatusManualReview
				err = p.Update(ctx, func(tx store.Tx) error { return tx.PutEntry(extra) })
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	want, _ := recountEntries(t, ps[0], base, base)
	if want.Entries <= n || len(want.Cells) < 6 {
		t.Fatalf("the run did not mix entries: %+v", want)
	}
	assertCountersEqualRecount(t, ps[1], base, base.Add(48*time.Hour))
}

// A transaction that rolls back (its function failed, or it never
// committed) leaves the counters as they were, whatever it wrote: the
// counts go out with COMMIT only.
func TestPostgresRolledBackEntryWritesCountNothing(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	recs := []*store.EntryRecord{mixedEntry(0, base), mixedEntry(1, base), mixedEntry(2, base)}
	if _, err := p.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	before := entryCounters(t, p)
	claims, err := p.Claim(ctx, "w", base.Add(time.Hour), 1, time.Minute)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v, %v", claims, err)
	}
	fctx := store.WithFence(ctx, store.Fence{Ref: claims[0].Entry.Entry.Ref(), Token: claims[0].Token})
	errFail := errors.New("fail")
	err = p.Update(fctx, func(tx store.Tx) error {
		r := claims[0].Entry
		r.Status, r.Class = store.StatusQuarantined, triage.Poison
		if err := tx.PutEntry(r); err != nil {
			return err
		}
		other, err := tx.Entry(recs[2].Entry.Ref())
		if err != nil || other == nil {
			return fmt.Errorf("read: %v", err)
		}
		other.Status = store.StatusResolved
		if err := tx.PutEntry(other); err != nil {
			return err
		}
		if err := tx.PutEntry(mixedEntry(3, base)); err != nil { // a new entry
			return err
		}
		return errFail
	})
	if !errors.Is(err, errFail) {
		t.Fatalf("update: %v", err)
	}
	// A fence no longer current fails the transaction before it writes.
	stale := store.WithFence(ctx, store.Fence{Ref: claims[0].Entry.Entry.Ref(), Token: claims[0].Token - 1})
	if err := p.Update(stale, func(tx store.Tx) error { return tx.PutEntry(mixedEntry(4, base)) }); !errors.Is(err, store.ErrStaleFence) {
		t.Fatalf("stale update: %v", err)
	}
	if got := entryCounters(t, p); !reflect.DeepEqual(got, before) {
		t.Errorf("after rolled-back writes:\n%+v\nbefore:\n%+v", got, before)
	}
	assertCountersEqualRecount(t, p, base, base.Add(48*time.Hour))
}

// A replayctl older than schema version 9 that started before a newer
// one migrated goes on writing (it checked the version when it started),
// and counts nothing itself: its writes are still counted, by the
// triggers it relied on, which skip the newer writers' (or those would
// count twice). The older writer is played by its statements (version 8's
// PutEntry and Ingest) on a connection of its own.
func TestPostgresOlderReplayctlWritingMeanwhileIsCounted(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	p := openPG(t, dsn, store.Options{})
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	if _, err := p.Ingest(ctx, []*store.EntryRecord{mixedEntry(0, base), mixedEntry(1, base)}); err != nil {
		t.Fatal(err)
	}
	write := olderWriter(t, dsn)
	moved := mixedEntry(0, base)
	moved.Status, moved.Class = store.StatusQuarantined, triage.Poison
	write(moved)
	write(mixedEntry(2, base))
	// The newer writer moves what the older one wrote, and the other way.
	changeEntry(t, p, mixedEntry(2, base).Entry.Ref(), func(r *store.EntryRecord) { r.Status = store.StatusReplayed })
	back := mixedEntry(1, base)
	back.Status = store.StatusResolved
	write(back)
	if c := entryCounters(t, p); c.Entries != 3 {
		t.Errorf("counted %d entries, want 3", c.Entries)
	}
	assertCountersEqualRecount(t, p, base, base.Add(48*time.Hour))
}

// A replayctl that finds a schema newer than it knows refuses to start:
// it would write without what the newer schema expects of its writers
// (since version 9, counting entries in Go).
func TestPostgresRefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	p := openPG(t, dsn, store.Options{})
	if v, err := p.SchemaVersion(ctx); err != nil || v != len(migrations) {
		t.Fatalf("schema version %d, %v; want %d", v, err, len(migrations))
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	q, err := Open(ctx, dsn, store.Options{})
	if err == nil {
		q.Close()
		t.Fatal("opened a database with a newer schema")
	}
	if want := fmt.Sprintf("schema version %d, this replayctl knows %d: upgrade replayctl", len(migrations)+1, len(migrations)); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

// olderWriter writes an entry as a replayctl of schema version 8 did: one
// statement on its own connection, counting nothing itself.
func olderWriter(t *testing.T, dsn string) func(*store.EntryRecord) {
	t.Helper()
	ctx := context.Background()
	old, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Close(ctx) })
	return func(r *store.EntryRecord) {
		t.Helper()
		rec, err := json.Marshal(store.EncodeEntry(r))
		if err != nil {
			t.Fatal(err)
		}
		c := colsOf(r)
		if _, err := old.Exec(ctx, `INSERT INTO entries (ref, rec, payload, sig, seen, open_seen, state, last_failed) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (ref) DO UPDATE SET rec = excluded.rec, payload = excluded.payload, sig = excluded.sig, seen = excluded.seen,
		  open_seen = excluded.open_seen, state = excluded.state, last_failed = excluded.last_failed`,
			pgKey(r.Entry.Ref()), rec, []byte(r.Entry.Payload), c.sig, c.seen, c.openSeen, c.state, c.lastFailed); err != nil {
			t.Fatal(err)
		}
	}
}

// A database at schema version 8 (the counters kept by ungated triggers)
// is migrated to 9 when a newer replayctl opens it: the triggers are
// replaced by ones that skip the transactions counting in Go, so what the
// newer replayctl writes is counted once (with migration 9 left out the
// old triggers would count it a second time), while an older replayctl
// still writing meanwhile is counted by the triggers. Every fresh test
// database is created at 9 directly; this one is taken back to 8 first.
func TestPostgresMigratesVersion8To9(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	v8 := openPG(t, dsn, store.Options{})
	if _, err := v8.pool.Exec(ctx, `DROP TRIGGER entries_count ON entries; DROP TRIGGER entries_recount ON entries;`+
		pgEntryTriggersV8+`; DELETE FROM schema_migrations WHERE version = 9`); err != nil {
		t.Fatal(err)
	}
	if v, err := v8.SchemaVersion(ctx); err != nil || v != 8 {
		t.Fatalf("schema version %d, %v; want 8", v, err)
	}
	v8.Close()
	write := olderWriter(t, dsn)
	for i := range 6 {
		write(mixedEntry(i, base))
	}

	p := openPG(t, dsn, store.Options{})
	if v, err := p.SchemaVersion(ctx); err != nil || v != len(migrations) {
		t.Fatalf("after opening: schema version %d, %v; want %d", v, err, len(migrations))
	}
	var gated int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = 'entries'::regclass
		AND tgname IN ('entries_count', 'entries_recount') AND pg_get_triggerdef(oid) LIKE '%`+countsInGoSetting+`%'`).Scan(&gated); err != nil {
		t.Fatal(err)
	}
	if gated != 2 {
		t.Fatalf("%d of the two entry triggers skip the transactions counting in Go", gated)
	}
	// The newer replayctl inserts and moves entries, some the older one
	// wrote; the older one moves one the newer one wrote.
	if _, err := p.Ingest(ctx, []*store.EntryRecord{mixedEntry(4, base), mixedEntry(6, base), mixedEntry(7, base)}); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 3, 6} {
		changeEntry(t, p, mixedEntry(i, base).Entry.Ref(), func(r *store.EntryRecord) {
			r.Status, r.Class = store.StatusQuarantined, triage.Poison
		})
	}
	moved := mixedEntry(7, base)
	moved.Status = store.StatusResolved
	write(moved)
	if c := entryCounters(t, p); c.Entries != 8 {
		t.Errorf("counted %d entries, want 8", c.Entries)
	}
	assertCountersEqualRecount(t, p, base, base.Add(48*time.Hour))
}

// changeEntry reads the stored entry ref, changes it and writes it back,
// in one Update, as a person's change does.
func changeEntry(t *testing.T, p *Postgres, ref string, change func(*store.EntryRecord)) {
	t.Helper()
	if err := p.Update(context.Background(), func(tx store.Tx) error {
		r, err := tx.Entry(ref)
		if err != nil || r == nil {
			return fmt.Errorf("read %s: %v", ref, err)
		}
		change(r)
		return tx.PutEntry(r)
	}); err != nil {
		t.Fatal(err)
	}
}
