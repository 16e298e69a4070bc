package postgres

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

// Issue 16, PostgreSQL workers that scale: no index of the entries table
// may read the record (rec). Migration 2's five expression indexes did, so
// every decision and outcome (which rewrite rec) parsed the record as
// jsonb once per index and could never be a HOT update. Fails at schema
// version 9: entries_status, entries_class, entries_action, entries_source
// and entries_topic read replayctl_doc(rec).
func TestPostgresEntryIndexesReadNoRecord(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	rows, err := p.pool.Query(ctx, `SELECT c.relname, pg_get_indexdef(i.indexrelid)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = 'entries'::regclass
		  AND (pg_get_indexdef(i.indexrelid) LIKE '%replayctl_doc%'
		    OR (SELECT attnum FROM pg_attribute WHERE attrelid = 'entries'::regclass AND attname = 'rec') = ANY(i.indkey))`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		t.Errorf("index %s reads the record: %s", name, def)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// colsEntry is mixedEntry with the filtered values varied: classes and
// actions, a topic and a source in other scripts and cases (lower() in
// the filter), a topic that is not valid UTF-8 (stored as encoding/json
// writes it, each bad byte as U+FFFD).
func colsEntry(i int, base time.Time) *store.EntryRecord {
	r := mixedEntry(i, base)
	r.Class = []triage.Class{triage.Transient, triage.Poison, triage.Governance, triage.UnknownCommit}[i%4]
	r.Action = []triage.Action{triage.AutoReplay, triage.Quarantine, triage.RequireApproval}[i%3]
	r.Status = []string{store.StatusPending, store.StatusReplaying, store.StatusReplayed, store.StatusQuarantined, store.StatusFailed}[i%5]
	switch i % 6 {
	case 1:
		r.Entry.Source = "Cordum"
	case 2:
		r.Entry.Topic = "Ünïcode.Topic"
	case 3:
		r.Entry.Topic = "bad\xffutf8"
	}
	return r
}

// assertColsMatchRecord checks that every row's filter columns hold what
// migration 2's expressions read from its record: the filters then match
// exactly the rows they matched.
func assertColsMatchRecord(t *testing.T, p *Postgres) {
	t.Helper()
	var n, bad int
	const pgDoc = `replayctl_doc(rec)` // the test data holds no \u0000
	if err := p.pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE
		  (lower(coalesce(state, '')), lower(coalesce(class, '')), lower(coalesce(action, '')), lower(coalesce(source, '')), coalesce(topic, ''))
		  IS DISTINCT FROM
		  (lower(coalesce(`+pgDoc+`->>'status', '')), lower(coalesce(`+pgDoc+`->>'class', '')), lower(coalesce(`+pgDoc+`->>'action', '')),
		   lower(coalesce(`+pgDoc+`->'entry'->>'source', '')), coalesce(`+pgDoc+`->'entry'->>'topic', '')))
		FROM entries`).Scan(&n, &bad); err != nil {
		t.Fatal(err)
	}
	if n == 0 || bad != 0 {
		t.Fatalf("%d of %d entries have filter columns that differ from their record", bad, n)
	}
}

// colsFilters are filters on every filtered field.
var colsFilters = []store.EntryFilter{
	{Classes: []string{"transient"}},
	{Classes: []string{"POISON", "governance"}, States: []string{store.StatusPending, store.StatusReplayed}},
	{Actions: []string{"quarantine"}},
	{Sources: []string{"cordum"}},
	{Sources: []string{"jsonl"}, Actions: []string{"auto_replay"}},
	{States: store.OpenStates()},
	{Topic: "orders.*"},
	{Topic: "Ünïcode.Topic"},
}

// pagedRefs pages f through to the end.
func pagedRefs(t *testing.T, p *Postgres, f store.EntryFilter) []string {
	t.Helper()
	out := []string{}
	cursor := ""
	for {
		page, err := p.Page(context.Background(), f, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Items {
			out = append(out, r.Entry.Ref())
		}
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
}

// scannedRefs filters every entry in Go (EntryFilter.Match).
func scannedRefs(t *testing.T, p *Postgres, f store.EntryFilter) []string {
	t.Helper()
	if err := f.Prepare(); err != nil {
		t.Fatal(err)
	}
	all := pagedRefs(t, p, store.EntryFilter{})
	out := []string{}
	for _, ref := range all {
		var r *store.EntryRecord
		if err := p.View(context.Background(), func(tx store.Tx) error {
			var err error
			r, err = tx.Entry(ref)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if f.Match(r) {
			out = append(out, ref)
		}
	}
	sort.Strings(out)
	return out
}

func assertPagesMatchScan(t *testing.T, p *Postgres) {
	t.Helper()
	for _, f := range colsFilters {
		got, want := pagedRefs(t, p, f), scannedRefs(t, p, f)
		if len(want) == 0 {
			t.Fatalf("filter %+v matches nothing: the test data does not exercise it", f)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("filter %+v pages %v, a scan finds %v", f, got, want)
		}
	}
}

// A database at schema version 9 (the filtered fields indexed as
// expressions over the record) is migrated to 10 when a newer replayctl
// opens it: the columns are backfilled from the records, so every filter
// pages what a scan of the records finds. A replayctl of version 9 still
// running meanwhile writes rec without the columns: the trigger fills them
// for it (without the trigger its entries would be missing from filtered
// pages), and skips the newer writer, which wrote them itself.
func TestPostgresMigratesVersion9To10(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	v9 := openPG(t, dsn, store.Options{})
	if _, err := v9.pool.Exec(ctx, `DROP TRIGGER entries_cols ON entries; DROP FUNCTION replayctl_entry_cols();
		DROP INDEX entries_status, entries_class, entries_action, entries_source, entries_topic;
		ALTER TABLE entries DROP COLUMN class, DROP COLUMN action, DROP COLUMN source, DROP COLUMN topic;
		`+strings.SplitN(migrations[1], "$$;", 2)[1]+`;
		DELETE FROM schema_migrations WHERE version = 10`); err != nil {
		t.Fatal(err)
	}
	if v, err := v9.SchemaVersion(ctx); err != nil || v != 9 {
		t.Fatalf("schema version %d, %v; want 9", v, err)
	}
	v9.Close()
	write := olderWriter(t, dsn)
	for i := range 30 {
		write(colsEntry(i, base))
	}

	p := openPG(t, dsn, store.Options{})
	if v, err := p.SchemaVersion(ctx); err != nil || v != len(migrations) {
		t.Fatalf("after opening: schema version %d, %v; want %d", v, err, len(migrations))
	}
	assertColsMatchRecord(t, p)
	assertPagesMatchScan(t, p)

	// The newer replayctl writes and moves entries, some the older one
	// wrote; the older one moves one the newer one wrote and adds more.
	var recs []*store.EntryRecord
	for i := 30; i < 42; i++ {
		recs = append(recs, colsEntry(i, base))
	}
	if _, err := p.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 3, 31, 35} {
		changeEntry(t, p, colsEntry(i, base).Entry.Ref(), func(r *store.EntryRecord) {
			r.Status, r.Class, r.Action, r.Entry.Topic = store.StatusQuarantined, triage.Poison, triage.Quarantine, "orders.moved"
		})
	}
	moved := colsEntry(32, base)
	moved.Class, moved.Entry.Source = triage.Governance, "nexora"
	write(moved)
	for i := 42; i < 48; i++ {
		write(colsEntry(i, base))
	}
	assertColsMatchRecord(t, p)
	assertPagesMatchScan(t, p)
	assertCountersEqualRecount(t, p, base, base.Add(48*time.Hour))

	var gated int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = 'entries'::regclass
		AND tgname = 'entries_cols' AND pg_get_triggerdef(oid) LIKE '%`+colsInGoSetting+`%'`).Scan(&gated); err != nil {
		t.Fatal(err)
	}
	if gated != 1 {
		t.Fatal("the filter columns' trigger does not skip the transactions writing them in Go")
	}
}

// The newer writer's own values (no trigger: it is skipped) are what the
// record's expressions read, for every kind of write: Ingest, a first
// PutEntry, a PutEntry replacing a row, a fenced one.
func TestPostgresFilterColumnsWrittenFromGo(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	// The trigger would hide a wrong value from Go: take it away.
	if _, err := p.pool.Exec(ctx, `DROP TRIGGER entries_cols ON entries`); err != nil {
		t.Fatal(err)
	}
	var recs []*store.EntryRecord
	for i := range 24 {
		recs = append(recs, colsEntry(i, base))
	}
	if _, err := p.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	for i := 24; i < 36; i++ {
		if err := p.Update(ctx, func(tx store.Tx) error { return tx.PutEntry(colsEntry(i, base)) }); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 {
		r := colsEntry(i+1, base)
		r.Entry.ID = colsEntry(i, base).Entry.ID
		if err := p.Update(ctx, func(tx store.Tx) error { return tx.PutEntry(r) }); err != nil {
			t.Fatal(err)
		}
	}
	claims, err := p.Claim(ctx, "w", base.Add(-time.Hour), 4, time.Minute)
	if err != nil || len(claims) == 0 {
		t.Fatalf("claim: %d, %v", len(claims), err)
	}
	for _, c := range claims {
		fctx := store.WithFence(ctx, store.Fence{Ref: c.Entry.Entry.Ref(), Token: c.Token})
		r := c.Entry
		r.Class, r.Action, r.Status, r.Entry.Topic = triage.Governance, triage.RequireApproval, store.StatusAwaitingApproval, fmt.Sprintf("claimed.%d", c.Token)
		if err := p.Update(fctx, func(tx store.Tx) error { return tx.PutEntry(r) }); err != nil {
			t.Fatal(err)
		}
	}
	assertColsMatchRecord(t, p)
	assertPagesMatchScan(t, p)
}
