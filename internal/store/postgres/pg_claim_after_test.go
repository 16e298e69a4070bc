package postgres

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// forwardWalk runs the claim's first walk (the statement of
// replayctl_claim from the mark) as the function plans it, with EXPLAIN
// ANALYZE in a transaction rolled back, and returns how many rows it
// read and left (a live lease: Rows Removed by Filter) and its plan.
func forwardWalk(t *testing.T, p *Postgres, since time.Time, after string, n int) (removed int, plan string) {
	t.Helper()
	ctx := context.Background()
	var src string
	var config []string
	if err := p.pool.QueryRow(ctx, `SELECT prosrc, coalesce(proconfig, '{}') FROM pg_proc WHERE oid = 'replayctl_claim(timestamptz, int, text, bigint, text)'::regprocedure`).Scan(&src, &config); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)refs := ARRAY\(\s*(SELECT .*?FOR UPDATE SKIP LOCKED)\);`).FindStringSubmatch(src)
	if m == nil {
		t.Fatalf("no walk in %q", src)
	}
	sql := m[1]
	for i, name := range []string{"p_since", "p_n", "p_owner", "p_lease_ms", "p_after"} {
		sql = regexp.MustCompile(`\b`+name+`\b`).ReplaceAllString(sql, fmt.Sprintf("$$%d", i+1))
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, kv := range config {
		k, v, _ := strings.Cut(kv, "=")
		if _, err := tx.Exec(ctx, `SELECT set_config($1, $2, true)`, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(ctx, `PREPARE walk(timestamptz, int, text, bigint, text) AS `+sql); err != nil {
		t.Fatalf("prepare %s: %v", sql, err)
	}
	defer func() { _, _ = tx.Exec(ctx, `DEALLOCATE walk`) }()
	lit := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	rows, err := tx.Query(ctx, fmt.Sprintf(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE walk(%s, %d, 'w', 1000, %s)`,
		lit(since.UTC().Format(time.RFC3339Nano)), n, lit(after)))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan = strings.Join(lines, "\n")
	for _, m := range regexp.MustCompile(`Rows Removed by Filter: (\d+)`).FindAllStringSubmatch(plan, -1) {
		k, _ := strconv.Atoi(m[1])
		removed += k
	}
	return removed, plan
}

// Issue 33: every claim walked entries_work from its start, past every
// entry in flight (leased: read and skipped) and the index entries that
// earlier versions of the replayed entries left there, a walk growing
// with the run. A process's claims now walk on from the last unchecked
// entry it claimed in the run: past another worker's leased entries once,
// not at every claim. What lies behind the mark is still claimed (here:
// the other worker's entries, once its lease has run out).
func TestPostgresClaimWalksOnFromItsMark(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	a := openPG(t, dsn, store.Options{})
	b := openPG(t, dsn, store.Options{})
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	var recs []*store.EntryRecord
	for i := range 80 {
		recs = append(recs, mixedEntry(i, base))
	}
	if _, err := a.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	held, err := a.Claim(ctx, "a", since, 40, 500*time.Millisecond)
	if err != nil || len(held) != 40 {
		t.Fatalf("worker a claimed %d: %v", len(held), err)
	}
	got := map[string]int{}
	claim := func(n int) int {
		cs, err := b.Claim(ctx, "b", since, n, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			got[c.Entry.Entry.Ref()]++
		}
		return len(cs)
	}
	for range 5 {
		if n := claim(5); n != 5 {
			t.Fatalf("claimed %d, want 5", n)
		}
	}
	// The mark is the last entry b claimed; from there the walk reads
	// what it takes, and from the start it reads a's 40 and b's 25 first.
	var last string
	for ref := range got {
		last = max(last, pgKey(ref))
	}
	after := b.claimAfter(since)
	if after == nil || *after != last {
		t.Fatalf("b's claims walk on from %v, want its last claimed entry %s", after, last)
	}
	if removed, plan := forwardWalk(t, b, since, *after, 5); removed != 0 || !strings.Contains(plan, "entries_work") {
		t.Errorf("the walk from the mark read %d leased entries:\n%s", removed, plan)
	}
	if removed, plan := forwardWalk(t, b, since, "", 5); removed < 65 {
		t.Errorf("the walk from the start read %d leased entries, want 65:\n%s", removed, plan)
	}
	time.Sleep(600 * time.Millisecond) // until a's lease has run out
	for claim(10) > 0 {
	}
	for _, r := range recs {
		if n := got[r.Entry.Ref()]; n != 1 {
			t.Errorf("%s claimed %d times by b, want once", r.Entry.Ref(), n)
		}
	}
	if len(got) != len(recs) {
		t.Errorf("b claimed %d entries, want %d", len(got), len(recs))
	}
}
