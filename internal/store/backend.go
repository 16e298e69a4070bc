package store

import (
	"context"
	"errors"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/triage"
)

// Backend is the one store contract: every operation the commands, the
// server, the entry operations, the backtest and the audit verifier use,
// implemented by both backends (Bolt: one process; Postgres: many
// workers). Callers take a Backend and call what they need; there is no
// optional interface to test for. An operation a backend cannot do
// returns ErrNotImplemented (notimpl.go): the work sharing of a shared
// store (Shared) on bbolt, a bbolt-only group commit on PostgreSQL.
// Features says what differs in kind between them, and callers key on it
// (Features().Shared), never on the type: the runner (internal/replay)
// never reaches an operation the store's Features rule out.
//
// storetest runs the same suite against both backends; a backend whose
// answers differ fails it.
type Backend interface {
	Store
	// AuditChain: the records, the head and its signature, the base of a
	// pruned chain, the unsealed tail, the snapshots and the ledger the
	// verifier compares with the chain.
	AuditChain
	Indexed
	Grouped
	// Shared: work sharing (claims, leases, fencing, the ingest lead);
	// ErrNotImplemented where Features().Shared is false.
	Shared

	// PrepareEntry works out before a transaction how next is stored in
	// place of prev, the record as this process stored it (nil: a new
	// entry, its key holding nothing), for the transaction's
	// Tx.PutPrepared (issue 33: what is done inside bbolt's write lock
	// is serial). nil where the store works nothing out ahead.
	PrepareEntry(prev, next *EntryRecord) *PreparedEntry

	// Entries calls fn for every entry in ref order, payload included: a
	// scan, for exports and reports that read the whole store.
	Entries(ctx context.Context, fn func(*EntryRecord) error) error
	// SortedPage returns up to limit entries matching f after cursor, by
	// last failure, oldest first (newest: newest first).
	SortedPage(ctx context.Context, f EntryFilter, newest bool, cursor string, limit int) (*EntryPage, error)
	// Gauges reads a scrape's counts: entries by (source, class, action,
	// state), open depth by (source, topic), the oldest open entry.
	Gauges(ctx context.Context) (*Gauges, error)
	// RefsByID returns the refs of the entries whose source id is id, in
	// ref order.
	RefsByID(ctx context.Context, id string) ([]string, error)

	LedgerView(ctx context.Context, key string) (triage.LedgerView, error)
	// LedgerRecords calls fn for every ledger record in key order.
	LedgerRecords(ctx context.Context, fn func(*idempotency.Record) error) error

	// Approvals calls fn for every approval request, in id order.
	Approvals(ctx context.Context, fn func(*Approval) error) error
	// PendingApprovals calls fn with every request stored as pending,
	// oldest first (expiry is the reader's to apply).
	PendingApprovals(ctx context.Context, fn func(*Approval) error) error
	// ApprovalsByState calls fn with the requests whose stored state is
	// one of states (case-insensitive; none: every state), by state and
	// within a state oldest first.
	ApprovalsByState(ctx context.Context, states []string, fn func(*Approval) error) error

	// AuditSeqs returns the seqs of the (sealed) audit records matching
	// f, oldest first, from the audit indexes (at least one field set).
	AuditSeqs(ctx context.Context, f AuditFilter) ([]uint64, error)
	// AuditRecords calls fn with the records of these seqs in the order
	// given; a seq with no (sealed) record is skipped.
	AuditRecords(ctx context.Context, seqs []uint64, fn func(seq uint64, rec audit.Sealed, decodeErr error) error) error
	// AuditRangeRaw is AuditRange undecoded: each record as bytes that
	// DecodeValue reads into an audit.Sealed, valid only during fn.
	AuditRangeRaw(ctx context.Context, from uint64, fn func(seq uint64, raw []byte) error) error
	// EntryAudit calls fn, oldest first, with the records about one entry:
	// those naming its ref, and those naming no entry but its key.
	EntryAudit(ctx context.Context, ref, key string, fn func(seq uint64, rec audit.Sealed, decodeErr error) error) error
	// AuditTamperRefusals counts the appends and seals refused because the
	// chain was edited outside replayctl.
	AuditTamperRefusals() uint64

	PutSnapshot(ctx context.Context, id string, snapshot any) error
	Snapshot(ctx context.Context, id string, out any) error

	// Runs (internal/runs): records opaque to the store.
	PutRun(ctx context.Context, id string, rec []byte) error
	UpdateRun(ctx context.Context, id string, fn func(cur []byte) ([]byte, error)) error
	Run(ctx context.Context, id string) ([]byte, error)
	Runs(ctx context.Context, fn func(id string, rec []byte) error) error

	// Prune moves what retention lets go into an archive, then removes it
	// (PruneOptions; a kill at any point loses nothing).
	Prune(ctx context.Context, o PruneOptions) (*PruneResult, error)

	// TryRunLock takes the scheduler lock: one reconcile at a time across
	// the processes sharing the store; ok is false when another holds it.
	TryRunLock(ctx context.Context) (release func(), ok bool, err error)

	// Instance names the process instance holding the store.
	Instance() string
	// BeginDispatch marks key as being dispatched by this process until
	// the returned function is called (call it before the intent commits);
	// Dispatching reports whether it is now. Only bbolt, which one
	// process holds, tells from it whether a dispatching record of its own
	// instance is still in flight; on a shared store the lease decides,
	// and Dispatching is always false.
	BeginDispatch(key string) (end func())
	Dispatching(key string) bool
	// UpdateGroup commits fns together now, each fn's error its own
	// (bbolt's group commit, batch.go). A shared store's grouped writes
	// each need their claim checked, which the runner's commit queue does
	// (replay/shared_window.go): there every errs[i] is ErrNotImplemented.
	UpdateGroup(ctx context.Context, fns []func(Tx) error) (errs []error)
	// Features says what kind of store this is.
	Features() Features
}

// AuditChain is what a store tells about its audit chain, as
// audit.Verify reads it.
type AuditChain = audit.Chain

// Features says what differs in kind between backends (Watermill's
// Features): the suite and the callers read it rather than the type.
type Features struct {
	// Shared: many workers share the store (work sharing with leases and
	// fencing, the scheduler lock: Shared). Without it one process holds
	// the store, so a run recorded as running and not in this process has
	// no process left.
	Shared bool
}

// ErrNotImplemented: the backend cannot do this operation (River's
// riverdriver.ErrNotImplemented). Callers pass it on as any error.
var ErrNotImplemented = errors.New("not implemented by this store backend")

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
	// HeldElsewhere counts the entries not checked since a run began
	// that another owner's live lease holds, and when the last of those
	// leases ends.
	HeldElsewhere(ctx context.Context, owner string, since time.Time) (int, time.Time, error)
	// RenewLease extends a claim still current to lease from now, and
	// says whether it was current.
	RenewLease(ctx context.Context, ref string, token int64, lease time.Duration) (bool, error)
	// ReleaseLater queues Release(ref, token) to go with this process's
	// next claim (one round trip saved per entry); FlushReleases sends
	// what is queued now.
	ReleaseLater(ref string, token int64)
	FlushReleases(ctx context.Context) error
}
