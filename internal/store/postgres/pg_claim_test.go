package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// Issue 16: every worker read every source. One worker leads the ingest
// of a run; while it does, Ingesting says so and no other worker leads;
// once it completed, a worker whose run began before that does not read
// the sources again, one of a later run does.
func TestPostgresIngestsOncePerRun(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	a, b := openPG(t, dsn, store.Options{}), openPG(t, dsn, store.Options{})
	since, err := a.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done, lead, err := a.LeadIngest(ctx, since)
	if err != nil || !lead {
		t.Fatalf("first worker does not lead: %v", err)
	}
	// A test that fails holding the lead must still let the pool close.
	held := true
	t.Cleanup(func() {
		if held {
			done(false)
		}
	})
	if busy, err := b.Ingesting(ctx); err != nil || !busy {
		t.Fatalf("ingest in progress not seen: %v %v", busy, err)
	}
	if _, lead, err := b.LeadIngest(ctx, since); err != nil || lead {
		t.Fatalf("second worker leads while the first ingests (%v)", err)
	}
	// A failed ingest is not complete: the next worker of the run leads.
	done(false)
	held = false
	if busy, err := b.Ingesting(ctx); err != nil || busy {
		t.Fatalf("ingest still seen after it ended: %v %v", busy, err)
	}
	done, lead, err = b.LeadIngest(ctx, since)
	if err != nil || !lead {
		t.Fatalf("no lead after a failed ingest: %v", err)
	}
	done(true)
	if _, lead, err := a.LeadIngest(ctx, since); err != nil || lead {
		t.Fatalf("the run's sources read twice (%v)", err)
	}
	later, err := a.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	later = later.Add(time.Millisecond)
	done, lead, err = a.LeadIngest(ctx, later)
	if err != nil || !lead {
		t.Fatalf("a later run does not ingest: %v", err)
	}
	done(true)
}

// Issue 16: 4 workers on PostgreSQL queued on the entries table's pages
// (LWLock BufferContent and relation extend waits on every entry write):
// pages were filled by the ingest, so each new version of a claimed entry
// went to the table's last page, with a new entry in every index. A page
// now keeps room: the claim's version stays on its entry's page (a HOT
// update: it changes no indexed column).
func TestPostgresClaimKeepsTheEntryOnItsPage(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	var recs []*store.EntryRecord
	for i := range 300 {
		recs = append(recs, &store.EntryRecord{Entry: entry.Entry{ID: fmt.Sprintf("e%03d", i), Source: "jsonl", Topic: "orders",
			IdempotencyKey: fmt.Sprintf("k%03d", i), Message: "upstream timeout", Payload: []byte(`{"order":1}`)}, Status: store.StatusPending})
	}
	if _, err := p.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	page := func(ref string) string {
		var ctid string
		if err := p.pool.QueryRow(ctx, `SELECT ctid::text FROM entries WHERE ref = $1`, pgKey(ref)).Scan(&ctid); err != nil {
			t.Fatal(err)
		}
		return strings.SplitN(strings.Trim(ctid, "()"), ",", 2)[0]
	}
	var pages []string
	for _, r := range recs {
		pages = append(pages, page(r.Entry.Ref()))
	}
	if pages[0] == pages[len(pages)-1] {
		t.Fatalf("all %d entries on page %s: too few to fill a page", len(recs), pages[0])
	}
	now, err := p.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := p.Claim(ctx, "w0", now, 20, time.Minute)
	if err != nil || len(claims) != 20 {
		t.Fatalf("claimed %d: %v", len(claims), err)
	}
	for i, r := range recs {
		if got := page(r.Entry.Ref()); got != pages[i] {
			for _, c := range claims {
				if c.Entry.Entry.Ref() == r.Entry.Ref() {
					t.Errorf("claimed entry %s moved from page %s to %s", r.Entry.Ref(), pages[i], got)
				}
			}
		}
	}
}

// A write under a claim locks the entry and its key's ledger row in the
// statement that checks the fence (two statements before, in one round
// trip): the ledger is read no more, the row is locked until COMMIT, an
// absent key reads as none, and a stale claim still writes nothing.
func TestPostgresFenceCheckLocksTheLedgerRowInItsStatement(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	p := openPG(t, dsn, store.Options{})
	const ref, key = "jsonl:e1", "k1"
	if _, err := p.Ingest(ctx, []*store.EntryRecord{{Entry: entry.Entry{ID: "e1", Source: "jsonl", IdempotencyKey: key,
		Payload: []byte(`{"order":1}`)}, Status: store.StatusPending}}); err != nil {
		t.Fatal(err)
	}
	c, ok, err := p.ClaimRef(ctx, ref, "w0", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	fenced := store.WithFence(ctx, store.Fence{Ref: ref, Token: c.Token, Key: key})
	reads := func(before, after Trips) (n int64) {
		for sql, k := range after.ByStatement {
			if strings.Contains(sql, "from ledger") || strings.Contains(sql, "from entries") {
				n += k - before.ByStatement[sql]
			}
		}
		return n
	}
	// The key is not in the ledger yet: the fence check says so.
	before := p.Trips()
	if err := p.Update(fenced, func(tx store.Tx) error {
		cur, err := tx.Ledger(key)
		if err != nil || cur != nil {
			return fmt.Errorf("ledger of a new key: %+v, %v", cur, err)
		}
		_, err = tx.Transition(idempotency.Transition{Key: key, To: idempotency.Decided, EntryRef: ref})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n := reads(before, p.Trips()); n != 1 {
		t.Errorf("%d statements read the entry and the ledger, want 1 (the fence check)", n)
	}
	// The key is there: read with the fence, locked until COMMIT (seen
	// from a session of its own, whose statements p does not count).
	other, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	before = p.Trips()
	if err := p.Update(fenced, func(tx store.Tx) error {
		cur, err := tx.Ledger(key)
		if err != nil || cur == nil || cur.State != idempotency.Decided {
			return fmt.Errorf("ledger of %s: %+v, %v", key, cur, err)
		}
		_, lerr := other.Exec(ctx, `SELECT 1 FROM ledger WHERE key = $1 FOR UPDATE NOWAIT`, pgKey(key))
		var pe *pgconn.PgError
		if !errors.As(lerr, &pe) || pe.Code != "55P03" {
			t.Errorf("another session locked the ledger row during the fenced write: %v", lerr)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := reads(before, p.Trips()); n != 1 {
		t.Errorf("%d statements read the entry and the ledger, want 1 (the fence check)", n)
	}
	// A stale claim writes nothing, and its mark (as a checked write under
	// it had left) is forgotten: such a claim is never released by this
	// process, so the mark would stay for the life of a serve.
	stale := store.WithFence(ctx, store.Fence{Ref: ref, Token: c.Token - 1, Key: key})
	p.markChecked(c.Token-1, true)
	if err := p.Update(stale, func(tx store.Tx) error {
		_, err := tx.Transition(idempotency.Transition{Key: key, From: idempotency.Decided, To: idempotency.Dispatching})
		return err
	}); !errors.Is(err, store.ErrStaleFence) {
		t.Fatalf("a stale claim's write: %v, want %v", err, store.ErrStaleFence)
	}
	if p.takeChecked(c.Token - 1) {
		t.Error("a claim found stale is still marked checked")
	}
}

// Issue 16, PostgreSQL workers that scale: a release moved last_checked,
// an indexed column, so it was a row version with an entry in each of the
// entries table's indexes. The write that ends an entry's handling under
// its claim (an outcome: any state but replaying) marks it checked in the
// update it makes anyway, and the release keeps that time: it changes no
// indexed column (a HOT update). A claim that ended replaying (a dispatch
// under way or a retry), or wrote nothing, is marked by its release, as
// before. Either way the run does not claim the entry again, and a later
// run does.
func TestPostgresReleaseKeepsTheOutcomesCheck(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	var recs []*store.EntryRecord
	for i := range 3 {
		recs = append(recs, mixedEntry(i, base))
	}
	if _, err := p.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	since, err := p.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := p.Claim(ctx, "w", since, 3, time.Minute)
	if err != nil || len(claims) != 3 {
		t.Fatalf("claimed %d, %v", len(claims), err)
	}
	checked := func(ref string) pgtype.Timestamptz {
		t.Helper()
		var at pgtype.Timestamptz
		if err := p.pool.QueryRow(ctx, `SELECT last_checked FROM entries WHERE ref = $1`, pgKey(ref)).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	// 0: an outcome; 1: a dispatch under way; 2: nothing written.
	write := func(c store.Claim, status string) {
		t.Helper()
		r := c.Entry
		r.Status = status
		fctx := store.WithFence(ctx, store.Fence{Ref: r.Entry.Ref(), Token: c.Token})
		if err := p.Update(fctx, func(tx store.Tx) error { return tx.PutEntry(r) }); err != nil {
			t.Fatal(err)
		}
	}
	write(claims[1], store.StatusReplaying)
	write(claims[0], store.StatusReplayed)
	atOutcome := checked(claims[0].Entry.Entry.Ref())
	if !atOutcome.Valid {
		t.Fatal("the outcome's write did not mark its entry checked")
	}
	if at := checked(claims[1].Entry.Entry.Ref()); at.Valid {
		t.Fatalf("a dispatch under way marked its entry checked (%v): a worker dying now would leave it to the next run", at.Time)
	}
	for _, c := range claims {
		p.ReleaseLater(c.Entry.Entry.Ref(), c.Token)
	}
	if err := p.FlushReleases(ctx); err != nil {
		t.Fatal(err)
	}
	if at := checked(claims[0].Entry.Entry.Ref()); at != atOutcome {
		t.Errorf("the release moved last_checked from %v to %v: not a HOT update", atOutcome.Time, at.Time)
	}
	for _, c := range claims[1:] {
		if at := checked(c.Entry.Entry.Ref()); !at.Valid || at.Time.Before(since) {
			t.Errorf("release of %s: last_checked %v, want this run's", c.Entry.Entry.Ref(), at)
		}
	}
	var leased int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM entries WHERE lease_owner IS NOT NULL OR lease_until IS NOT NULL`).Scan(&leased); err != nil || leased != 0 {
		t.Fatalf("%d entries still leased (%v)", leased, err)
	}
	if again, err := p.Claim(ctx, "w", since, 3, time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("the run claimed %d checked entries again (%v)", len(again), err)
	}
	later, err := p.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next, err := p.Claim(ctx, "w", later.Add(time.Millisecond), 3, time.Minute); err != nil || len(next) != 3 {
		t.Fatalf("a later run claimed %d of 3 (%v)", len(next), err)
	}
}

// Issue 16: the claim and the release were planned again at every call
// (their custom plans look cheaper than the generic one, so the plan cache
// never settled); as functions they run their generic plan, made once per
// connection. That plan must be the bounded one on a large table: the
// claim reads entries_work in order under its LIMIT (no sort of every
// unchecked entry), the release probes the primary key. Each function's
// own statement (from pg_proc) is explained as its generic plan, under the
// function's own settings.
//
// Issue 33: a connection plans them at its first call and keeps the plan,
// so the plan made on a table never analyzed (a new database's first
// ingest) counts as much: there the claim's update of the refs it locked
// and the release's join were sequential scans of entries, which every
// claim of that connection then ran (a third of PostgreSQL's CPU at 6,000
// entries). Explained first on a fresh table of a few entries, then on
// 3,000 analyzed.
func TestPostgresClaimUsesItsGenericPlan(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	n := 0
	for _, state := range []struct {
		name    string
		entries int
		analyze bool
	}{{"fresh table", 20, false}, {"analyzed table", 3000, true}} {
		var recs []*store.EntryRecord
		for ; n < state.entries; n++ {
			recs = append(recs, mixedEntry(n, base))
		}
		if _, err := p.Ingest(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if state.analyze {
			if _, err := conn.Exec(ctx, `ANALYZE entries`); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			fn, types, args string
			params          []string
			index           string
		}{
			{"replayctl_claim", "timestamptz, int, text, bigint", "now(), 4, 'w', 1000", []string{"p_since", "p_n", "p_owner", "p_lease_ms"}, "entries_work"},
			{"replayctl_release", "text[], bigint[], bool[]", "'{a,b}', '{1,2}', '{t,f}'", []string{"p_refs", "p_fences", "p_kept"}, "entries_pkey"},
		} {
			var src string
			var config []string
			if err := conn.QueryRow(ctx, `SELECT prosrc, coalesce(proconfig, '{}') FROM pg_proc WHERE oid = $1::regprocedure`, c.fn+"("+c.types+")").Scan(&src, &config); err != nil {
				t.Fatalf("%s: %v", c.fn, err)
			}
			if !slices.Contains(config, "plan_cache_mode=force_generic_plan") {
				t.Errorf("%s runs with %v, not its generic plan", c.fn, config)
			}
			body := regexp.MustCompile(`(?s)BEGIN\s+(?:RETURN QUERY )?(.*?);\s+END`).FindStringSubmatch(src)
			if body == nil {
				t.Fatalf("%s: no statement in %q", c.fn, src)
			}
			sql := body[1]
			for i, name := range c.params {
				sql = regexp.MustCompile(`\b`+name+`\b`).ReplaceAllString(sql, fmt.Sprintf("$$%d", i+1))
			}
			// EXPLAIN of an UPDATE plans it only; rolled back all the same,
			// with the function's settings (SET LOCAL) and the statement.
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range config {
				k, v, _ := strings.Cut(kv, "=")
				if _, err := tx.Exec(ctx, `SELECT set_config($1, $2, true)`, k, v); err != nil {
					t.Fatalf("%s: %s: %v", c.fn, kv, err)
				}
			}
			if _, err := tx.Exec(ctx, `PREPARE generic_`+c.fn+`(`+c.types+`) AS `+sql); err != nil {
				t.Fatalf("%s: prepare %s: %v", c.fn, sql, err)
			}
			var plan string
			if err := tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE generic_`+c.fn+`(`+c.args+`)`).Scan(&plan); err != nil {
				t.Fatalf("%s: explain: %v", c.fn, err)
			}
			_ = tx.Rollback(ctx)
			if _, err := conn.Exec(ctx, `DEALLOCATE generic_`+c.fn); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(plan, `"Seq Scan"`) || strings.Contains(plan, `"Sort"`) || !strings.Contains(plan, `"Index Name": "`+c.index+`"`) {
				t.Errorf("%s: %s's generic plan does not probe %s: %s", state.name, c.fn, c.index, plan)
			}
		}
	}
}

// The last write under a claim decides whether its entry is checked: a
// probe's write (outcome_unknown stays, so the write marks the entry
// checked), then the intent of an approved replay. A worker dying during
// that dispatch must leave the entry to the other workers of this run
// (claimable once its lease runs out, to become outcome_unknown), not to
// the next run: the intent clears last_checked, and the release is not
// kept (reviewer's finding: the marks were OR-ed, so the probe's stood).
func TestPostgresIntentAfterACheckedWriteLeavesTheEntryUnchecked(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	r0 := mixedEntry(0, time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC))
	r0.Status = store.StatusUnknown
	if _, err := p.Ingest(ctx, []*store.EntryRecord{r0}); err != nil {
		t.Fatal(err)
	}
	since, err := p.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := p.Claim(ctx, "w1", since, 1, time.Minute)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claimed %d, %v", len(claims), err)
	}
	c := claims[0]
	fctx := store.WithFence(ctx, store.Fence{Ref: c.Entry.Entry.Ref(), Token: c.Token})
	r := c.Entry
	checked := func() pgtype.Timestamptz {
		t.Helper()
		var at pgtype.Timestamptz
		if err := p.pool.QueryRow(ctx, `SELECT last_checked FROM entries WHERE ref = $1`, pgKey(r.Entry.Ref())).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	r.Probe = "not_committed"
	if err := p.Update(fctx, func(tx store.Tx) error { return tx.PutEntry(r) }); err != nil {
		t.Fatal(err)
	}
	if !checked().Valid {
		t.Fatal("the probe's write (outcome_unknown) did not mark the entry checked")
	}
	r.Status = store.StatusReplaying
	if err := p.Update(fctx, func(tx store.Tx) error { return tx.PutEntry(r) }); err != nil {
		t.Fatal(err)
	}
	if at := checked(); at.Valid && !at.Time.Before(since) {
		t.Fatalf("the intent left last_checked at %v (this run's): a worker dying now leaves its dispatch to the next run", at.Time)
	}
	if p.takeChecked(c.Token) {
		t.Error("the claim is still marked checked after its intent: its release would keep the probe's check")
	}
}

// A worker's releases go with its next claim, in one implicit transaction,
// and update its own entries' rows; another worker's window locks entries
// for its fence checks, a stale claim's row among them. The two can
// deadlock, and PostgreSQL aborts one: when that was the claim, the
// worker's run failed with "release N claims: deadlock detected" (found in
// review). Claim now sends the round trip again, as Update does. Here the
// claim waits first, so its deadlock check runs first and it is the one
// aborted.
func TestPostgresClaimRetriesWhenItsReleasesDeadlock(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	p := openPG(t, dsn, store.Options{})
	var recs []*store.EntryRecord
	for _, id := range []string{"x", "y"} {
		recs = append(recs, &store.EntryRecord{Entry: entry.Entry{ID: id, Source: "jsonl", IdempotencyKey: "k-" + id}, Status: store.StatusPending})
	}
	if _, err := p.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	now, err := p.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := p.Claim(ctx, "w1", now.Add(time.Second), 2, time.Minute)
	if err != nil || len(claims) != 2 {
		t.Fatal(claims, err)
	}
	slices.SortFunc(claims, func(a, b store.Claim) int { return strings.Compare(a.Entry.Entry.Ref(), b.Entry.Entry.Ref()) })
	for _, c := range claims { // x, then y
		p.ReleaseLater(c.Entry.Entry.Ref(), c.Token)
	}
	other, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, "SET deadlock_timeout = '5s'"); err != nil {
		t.Fatal(err)
	}
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM entries WHERE ref = $1 FOR UPDATE", pgKey("jsonl:y")); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := p.Claim(ctx, "w1", now.Add(time.Second), 1, time.Minute)
		got <- err
	}()
	// The claim's releases hold x and wait for y. The poll runs inside
	// tx, where pg_stat_activity is read once per transaction unless the
	// snapshot is cleared: a first poll before the release waited spun
	// until go test's 10 minute limit.
	for waiting := false; !waiting; time.Sleep(5 * time.Millisecond) {
		if _, err := other.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			t.Fatal(err)
		}
		if err := other.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%replayctl_release%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	// Now this transaction waits for x: a cycle.
	if _, err := tx.Exec(ctx, "SELECT 1 FROM entries WHERE ref = $1 FOR UPDATE", pgKey("jsonl:x")); err != nil {
		t.Fatalf("the other transaction was aborted, not the claim: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("claim after a deadlock of its releases: %v", err)
	}
}
