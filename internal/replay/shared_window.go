package replay

import (
	"context"
	"sync"

	"github.com/replayctl/replayctl/internal/store"
)

// Windows on a shared store (issue 16: "PostgreSQL workers that scale").
// A worker on PostgreSQL wrote each claimed entry's intent and outcome in
// transactions of their own: two commits, and with them BEGIN, COMMIT,
// the counters' upserts and the audit insert, per replay, each costing
// the database as much CPU as a row. As on bbolt (window.go), a worker now
// has a window of entries in flight, more than it dispatches at once
// (--max-parallel still bounds the calls out, through the window's
// sends), and their writes go through one commit queue: whatever intents
// and outcomes are waiting when a transaction can start are written in
// it, each part under its own entry's claim (the store checks each
// part's fence before the part runs: Tx.UnderFence). The counters of the
// whole transaction are one upsert, its audit records one insert.
//
// Unlike a bbolt window, the queue has no fixed members: an entry never
// waits for another's dispatch before its own outcome is written, so one
// slow call holds only its own slot (claims stay continuous, not
// convoys), and the batches grow exactly when the database is the bound
// (writes queue while a transaction is out).
//
// The invariants are one entry's (claim.go), unchanged:
//   - no dispatch without a durable intent: an entry waits for the commit
//     of the transaction that holds its intent before it dispatches;
//   - a crash leaves dispatching -> outcome_unknown: a kill leaves up to a
//     window of dispatching records, which the next owner of each claim
//     (after its lease) turns into outcome_unknown;
//   - one entry's failure is its own: when a grouped transaction fails (a
//     stale claim, a ledger that moved), each of its parts is committed
//     again alone (commitGroup.flush), so only the failing one sees the
//     error, and a stale claim's entry is not dispatched.

// sharedWindow is how many claimed entries a worker on a shared store
// has in flight: four times what it dispatches at once, as bbolt's
// windows (Reconciler.Window when set).
func (r *Reconciler) sharedWindow() int {
	if r.Window > 0 {
		return max(r.Window, r.MaxParallel, 1)
	}
	return max(4*r.MaxParallel, 1)
}

// queueFlushers is how many of a worker's grouped transactions may be out
// at once: one, the next filling while it is written. Two (one writing,
// one more starting as soon as anything waited) made smaller
// transactions: 4 workers bound by the database spent 1.58-1.79 ms of
// PostgreSQL's CPU and 0.67-0.81 ms of replayctl's per replay against
// 1.24-1.48 and 0.56-0.71 with one (three pairs alternating), and made
// fewer replays against the 10 ms target too.
const queueFlushers = 1

// queueMost bounds the parts of one transaction (its locks are held until
// it commits).
const queueMost = 64

// commitQueue commits what a worker's entries submit in as few
// transactions as it can, without waiting for any entry that has not
// submitted.
type commitQueue struct {
	s   Store
	ctx context.Context // the run's, without a claim: each part brings its own
	mu  sync.Mutex
	// pending are the parts waiting for a transaction; flushing counts
	// the transactions out.
	pending  []*groupCall
	flushing int
}

func newCommitQueue(ctx context.Context, s Store) *commitQueue {
	return &commitQueue{s: s, ctx: store.WithoutFence(context.WithoutCancel(ctx))}
}

// submit adds fn (under the claim in ctx) to the next transaction and
// waits for its commit.
func (q *commitQueue) submit(ctx context.Context, fn func(store.Tx) error) error {
	c := newGroupCall(ctx, fn)
	q.mu.Lock()
	q.pending = append(q.pending, c)
	start := q.flushing < queueFlushers
	if start {
		q.flushing++
	}
	q.mu.Unlock()
	if start {
		go q.drain()
	}
	return <-c.done
}

// drain writes what is pending, a transaction at a time, until nothing is.
func (q *commitQueue) drain() {
	g := &commitGroup{s: q.s}
	for {
		q.mu.Lock()
		n := min(len(q.pending), queueMost)
		if n == 0 {
			q.flushing--
			q.mu.Unlock()
			return
		}
		calls := append([]*groupCall(nil), q.pending[:n]...)
		q.pending = append(q.pending[:0], q.pending[n:]...)
		q.mu.Unlock()
		g.flush(q.ctx, calls)
	}
}
