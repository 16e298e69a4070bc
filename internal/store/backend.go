package store

import (
	"context"
	"errors"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/triage"
)

// Backend is a complete state store: what every command and the server
// use. Bolt (one process) and Postgres (many workers) implement it.
type Backend interface {
	Store
	audit.Reader
	Indexed
	Grouped
	LedgerView(ctx context.Context, key string) (triage.LedgerView, error)
	LedgerRecords(ctx context.Context, fn func(*idempotency.Record) error) error
	Entries(ctx context.Context, fn func(*EntryRecord) error) error
	Approvals(ctx context.Context, fn func(*Approval) error) error
	PutSnapshot(ctx context.Context, id string, snapshot any) error
	Snapshot(ctx context.Context, id string, out any) error
}

var (
	_ Backend = (*Bolt)(nil)
	_ Backend = (*Postgres)(nil)
)

// ErrStaleFence: a worker's claim on an entry is no longer current (its
// lease expired, or another worker claimed the entry since). The ledger
// rejects its transitions, so it can neither record nor dispatch.
var ErrStaleFence = errors.New("stale fencing token: the lease on this entry expired or was taken over")

// Fence is a worker's claim on an entry, carried in the context of the
// transactions made on its behalf.
type Fence struct {
	Ref   string
	Token int64
	// Key, when set, is the entry's idempotency key: PostgreSQL locks its
	// ledger row with the fence check, in the same round trip.
	Key string
}

type fenceKey struct{}

// WithFence returns ctx carrying the claim; shared backends check it in
// every ledger transition.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// WithoutFence returns ctx without a claim: for a transaction whose parts
// each bring their own (a window's, UnderFence on PostgreSQL).
func WithoutFence(ctx context.Context) context.Context {
	return context.WithValue(ctx, fenceKey{}, nil)
}

// FenceFrom returns the claim in ctx, if any.
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}

// Claim is an entry leased to one worker.
type Claim struct {
	Entry *EntryRecord
	Token int64
	// Until is when the lease ends at the latest on this process's clock
	// (the lease counted from before the claim was sent); zero when not
	// known.
	Until time.Time
}

// Shared is what a backend shared by many workers adds: work sharing with
// leases and fencing tokens, and one scheduler at a time.
type Shared interface {
	// Ingest adds entries not seen before (ON CONFLICT DO NOTHING) and
	// returns how many were new.
	Ingest(ctx context.Context, recs []*EntryRecord) (int, error)
	// Claim leases up to n entries not checked since `since` whose lease
	// is free or expired (FOR UPDATE SKIP LOCKED), each with a new token.
	Claim(ctx context.Context, owner string, since time.Time, n int, lease time.Duration) ([]Claim, error)
	// ClaimRef leases one entry by ref (a single replay), whatever its last
	// check, when its lease is free or expired; ok is false when another
	// worker holds it.
	ClaimRef(ctx context.Context, ref, owner string, lease time.Duration) (c Claim, ok bool, err error)
	// Release marks the entry checked and frees the lease, if the token is
	// still current.
	Release(ctx context.Context, ref string, token int64) error
	// Now is the database's clock (leases never depend on worker clocks).
	Now(ctx context.Context) (time.Time, error)
	// TryRunLock takes the scheduler lock (advisory); ok is false when
	// another process holds it.
	TryRunLock(ctx context.Context) (release func(), ok bool, err error)
	// LeadIngest makes this worker the one that reads the sources for the
	// run that started at since; lead is false when another worker is
	// ingesting or has ingested since then. done(ok) ends the lead.
	LeadIngest(ctx context.Context, since time.Time) (done func(ok bool), lead bool, err error)
	// Ingesting reports whether a worker is ingesting now (its entries
	// keep arriving to claim).
	Ingesting(ctx context.Context) (bool, error)
}
