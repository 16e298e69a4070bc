package postgres

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Trips counts what a Postgres store asked of the database since it was
// opened: how many statements, in how many round trips, and how long its
// callers waited, for a connection and for answers. A worker's cost on a
// shared store is mostly round trips (issue 16), so tests and the worker
// benchmark count them instead of timing them.
type Trips struct {
	Statements int64
	// RoundTrips: a query, an Exec or a whole pipelined batch is one.
	RoundTrips int64
	// Commits counts COMMITs sent (transactions that wrote or read).
	Commits int64
	// InDB is the time callers spent waiting for the database's answers;
	// PoolWait the time they waited for a free connection.
	InDB, PoolWait time.Duration
	// ByStatement counts statements by their text, white space folded.
	ByStatement map[string]int64
}

// Trips reports the counts so far.
func (p *Postgres) Trips() Trips {
	return p.trace.snapshot()
}

// pgTrace is the pool's tracer: atomic counters, and per-statement counts
// under a mutex (a lock is far cheaper than the round trip it counts).
type pgTrace struct {
	statements, roundTrips, commits atomic.Int64
	inDB, poolWait                  atomic.Int64
	mu                              sync.Mutex
	// by counts statements by their text as sent.
	by map[string]int64
}

type traceStartKey struct{}

func newPGTrace() *pgTrace { return &pgTrace{by: map[string]int64{}} }

func (t *pgTrace) snapshot() Trips {
	t.mu.Lock()
	by := make(map[string]int64, len(t.by))
	for k, v := range t.by {
		by[stmtName(k)] += v
	}
	t.mu.Unlock()
	return Trips{Statements: t.statements.Load(), RoundTrips: t.roundTrips.Load(), Commits: t.commits.Load(),
		InDB: time.Duration(t.inDB.Load()), PoolWait: time.Duration(t.poolWait.Load()), ByStatement: by}
}

// stmtName is a statement's text with its white space folded: the
// statements are the package's own, a bounded set.
func stmtName(sql string) string {
	return strings.ToLower(strings.Join(strings.Fields(sql), " "))
}

// count counts a statement under its text as sent; a snapshot folds the
// texts into names. Folding each statement as it went out (stmtName:
// split, join, lower) was ~3% of a worker's CPU (pprof, 4 workers on
// PostgreSQL, issue 33); a map lookup by the text is not.
func (t *pgTrace) count(sql string) {
	t.statements.Add(1)
	if strings.EqualFold(strings.TrimSpace(sql), "commit") {
		t.commits.Add(1)
	}
	t.mu.Lock()
	t.by[sql]++
	t.mu.Unlock()
}

func (t *pgTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	t.roundTrips.Add(1)
	t.count(data.SQL)
	return context.WithValue(ctx, traceStartKey{}, time.Now())
}

func (t *pgTrace) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	t.since(ctx, &t.inDB)
}

func (t *pgTrace) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.roundTrips.Add(1)
	return context.WithValue(ctx, traceStartKey{}, time.Now())
}

func (t *pgTrace) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	t.count(data.SQL)
}

func (t *pgTrace) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	t.since(ctx, &t.inDB)
}

func (t *pgTrace) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return context.WithValue(ctx, traceStartKey{}, time.Now())
}

func (t *pgTrace) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	t.since(ctx, &t.poolWait)
}

func (t *pgTrace) since(ctx context.Context, into *atomic.Int64) {
	if t0, ok := ctx.Value(traceStartKey{}).(time.Time); ok {
		into.Add(int64(time.Since(t0)))
	}
}
