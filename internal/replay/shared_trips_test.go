package replay

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store/postgres"
)

// Issue 16: a worker on PostgreSQL made ~25 statements in 4-5
// transactions per replay, each its own round trip, so its slots waited
// on the database rather than on the target. Counted, not timed: the
// store's tracer counts every statement and round trip a run sends.
func TestPostgresRoundTripsPerReplay(t *testing.T) {
	b, pg := sharedBundle(t)
	const n = 60
	var entries []map[string]any
	for i := range n {
		entries = append(entries, transient(fmt.Sprintf("e%03d", i), fmt.Sprintf("k%03d", i)))
	}
	src := b.jsonl("dlq.jsonl", entries...)
	before := pg.Trips()
	rep, err := b.worker(pg, "w0").Run(context.Background(), []source.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replays.Succeeded != n {
		t.Fatalf("%d of %d replayed", rep.Replays.Succeeded, n)
	}
	after := pg.Trips()
	per := func(a, b int64) float64 { return float64(a-b) / n }
	trips, stmts, commits := per(after.RoundTrips, before.RoundTrips), per(after.Statements, before.Statements), per(after.Commits, before.Commits)
	t.Logf("per replay: %.1f round trips, %.1f statements, %.1f commits; in the database %v, waiting for a connection %v (whole run)",
		trips, stmts, commits, after.InDB-before.InDB, after.PoolWait-before.PoolWait)
	logStatements(t, before, after, n)
	// Measured before: 40.1 round trips and 6 commits per replay (every
	// read its own read-only transaction, BEGIN and every write a round
	// trip of its own, the ledger row read again under its lock, each
	// release alone). Then ~10 round trips, ~20 statements and 2.1
	// commits (each entry's intent and outcome a transaction of its own).
	// With a window's writes grouped (shared_window.go): ~6.7, ~12.7 and
	// ~0.5; with the audit numbers taken with the fence checks, ~5.3
	// round trips and ~12 statements; with one transaction out at a time,
	// ~4.4, ~9.7 and ~0.3. The groups are whatever waits when
	// a transaction can start, so the bounds leave room; one transaction
	// per write would exceed them all.
	if trips > 8 || stmts > 17 || commits > 1.5 {
		t.Fatalf("%.1f round trips, %.1f statements and %.1f commits per replay, want at most 8, 17 and 1.5", trips, stmts, commits)
	}
}

func logStatements(t *testing.T, before, after postgres.Trips, n int) {
	type kv struct {
		k string
		v float64
	}
	var rows []kv
	for k, v := range after.ByStatement {
		if d := v - before.ByStatement[k]; d > 0 {
			rows = append(rows, kv{k, float64(d) / float64(n)})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].v > rows[j].v })
	for _, r := range rows {
		t.Logf("%6.2f  %.70s", r.v, r.k)
	}
}
