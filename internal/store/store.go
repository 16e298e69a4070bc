package store

import (
	"context"
	"errors"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/group"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/triage"
)

// Sentinel errors.
var (
	// ErrNotFound: no such entry, record or approval.
	ErrNotFound = errors.New("not found")
	// ErrReadOnly: a write was attempted on a store opened read-only.
	ErrReadOnly = errors.New("store opened read-only")
	// ErrAuditKeyRequired: a process without the audit key tried to append
	// to a chain whose head is signed. Its unsigned record would make the
	// legitimate chain look tampered with and let anyone drop that tail.
	ErrAuditKeyRequired = errors.New("the audit chain is signed: give this process the audit key (REPLAYCTL_AUDIT_KEY or --audit-key-file) to write to it")
)

// Entry statuses, as `dlq list --state` shows them.
const (
	StatusPending          = "pending"           // seen, waiting for the next reconcile to act
	StatusAwaitingApproval = "awaiting_approval" // an approval request is open
	StatusRejected         = "rejected"          // its approval was rejected; held until a person acts
	StatusManualReview     = "manual_review"     // a person must look
	StatusQuarantined      = "quarantined"       // held with an owner until released
	StatusReplaying        = "replaying"         // a dispatch is under way or will be retried
	StatusReplayed         = "replayed"          // a replay succeeded (or the key was already committed)
	StatusResolved         = "resolved"          // handled without replay (by a person or at the source)
	StatusFailed           = "failed"            // the replay failed definitively
	StatusUnknown          = "outcome_unknown"   // a replay may or may not have happened
)

// Holds.
const (
	HoldQuarantine = "quarantine"
	HoldFailed     = "failed"
	HoldResolved   = "resolved"
	HoldRejected   = "rejected"
)

// Statuses lists every status in display order.
var Statuses = []string{StatusPending, StatusAwaitingApproval, StatusRejected, StatusManualReview, StatusQuarantined,
	StatusReplaying, StatusReplayed, StatusResolved, StatusFailed, StatusUnknown}

// EntryRecord is an entry as the store keeps it, with where it stands.
type EntryRecord struct {
	Entry         entry.Entry   `json:"entry"`
	Status        string        `json:"status"`
	Class         triage.Class  `json:"class,omitempty"`
	Action        triage.Action `json:"action,omitempty"`
	Owner         string        `json:"owner,omitempty"`
	ApproverGroup string        `json:"approver_group,omitempty"`
	Reason        string        `json:"reason,omitempty"`
	LastDecision  uint64        `json:"last_decision,omitempty"`
	// Evidence is the evidence hash of the last recorded decision: a run
	// that decides the same again records nothing new.
	Evidence   string `json:"evidence,omitempty"`
	ApprovalID string `json:"approval_id,omitempty"`
	// Hold, when set, keeps the entry where it is across reconciles until a
	// person changes it: HoldQuarantine, HoldFailed or HoldResolved.
	Hold string `json:"hold,omitempty"`
	// Probe is the last compensating read's result for the entry's key.
	Probe string `json:"probe,omitempty"`
	// WriteBackPending names a write-back the source has not yet taken
	// (WriteBackReplayed or WriteBackResolved): set when it fails, or by a
	// resolve before the source is told, so the next reconcile retries it.
	WriteBackPending string `json:"write_back_pending,omitempty"`
	// Settled is set once the source is known not to hold a replayed
	// entry any more: the system answered that it is gone, or replayctl
	// took out an entry the source kept after its replay (settle.go). A
	// settled entry is never taken out again: a shared store's run
	// handles every stored entry, listed by the source or not.
	Settled   bool      `json:"settled,omitempty"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// NextAttemptAt is when a retryable failure's next attempt is due: a
	// run dispatches the entry only once it has come (zero: now).
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	// Group is the entry's failure group signature when rules.yaml's
	// groups section changes it from the default (set by the run that
	// decides it; nil: the default signature, GroupKey).
	Group *group.Key `json:"group,omitempty"`
}

// Write-backs an entry can be owed (EntryRecord.WriteBackPending).
const (
	WriteBackReplayed = "replayed"
	WriteBackResolved = "resolved"
)

// Tx is one atomic unit of work on the store. Backends implement it over
// their own transaction; everything done through one Tx commits together.
type Tx interface {
	// Ledger returns the record of key, or nil.
	Ledger(key string) (*idempotency.Record, error)
	// Transition applies a ledger compare-and-set (see idempotency.Apply).
	Transition(t idempotency.Transition) (idempotency.Record, error)
	// Append adds a record to the audit chain, setting its Seq (and Time
	// when zero). It returns the sealed record.
	Append(r *audit.Record) (audit.Sealed, error)
	// Entry returns the stored entry, or nil.
	Entry(ref string) (*EntryRecord, error)
	// PutEntry stores an entry record under its ref.
	PutEntry(r *EntryRecord) error
	// PutPrepared stores p.Next where the stored record is still p.Prev
	// (Backend.PrepareEntry), with what was worked out ahead; false,
	// nothing written, where it is not (a write came between) or the
	// store works nothing out ahead: the caller then reads the entry and
	// puts it with PutEntry.
	PutPrepared(p *PreparedEntry) (bool, error)
	// Approval returns an approval request, or nil.
	Approval(id string) (*Approval, error)
	// PutApproval stores an approval request.
	PutApproval(a *Approval) error
	// Lineage returns a replay lineage by its root, or nil.
	Lineage(root string) (*Lineage, error)
	// PutLineage stores a replay lineage.
	PutLineage(l *Lineage) error
	// GroupState returns a failure group's lifecycle record, or nil.
	GroupState(id string) (*GroupState, error)
	// PutGroupState stores a failure group's lifecycle record.
	PutGroupState(st *GroupState) error

	// ChainSucceeded returns the first audit record about the entry ref
	// that says key's replay succeeded (0: none): the runner asks before
	// dispatching a key the ledger says was sent before but not succeeded.
	ChainSucceeded(ref, key string) (uint64, error)
	// UnderFence runs fn as part of this transaction under the claim f
	// (a shared store checks and locks the claim's entry first);
	// CheckFences checks many claims at once, stale[i] the error of one
	// no longer current. ErrNotImplemented where the store has no claims
	// (Features().Shared false).
	UnderFence(f Fence, fn func(Tx) error) error
	CheckFences(fs []Fence) (stale []error, err error)
}

// PreparedEntry is an entry record's next version worked out before the
// transaction that stores it (Backend.PrepareEntry, Tx.PutPrepared).
type PreparedEntry struct {
	// Prev is the record as this process stored it, Next the record to
	// store in its place, keeping Prev's payload. Neither changes after,
	// but for one field: where Prev is nil (a new entry, stored with its
	// payload) and Next's LastDecision was not zero, the transaction sets
	// it to the seq of the decision record it appends before it calls
	// PutPrepared (a seq is known only inside).
	Prev, Next *EntryRecord
	// Ahead is what the backend worked out (bbolt: both records' bytes
	// and Next's index keys).
	Ahead any
}

// Store is the state a replayctl process works on.
type Store interface {
	// Update runs fn in a read-write transaction, committed durably when
	// fn returns nil. Concurrent callers may be grouped into one commit;
	// fn may then run more than once and must only act through tx.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
	Close() error
}

// LedgerView reads key's ledger record from s for triage.
func LedgerView(ctx context.Context, s Store, key string) (triage.LedgerView, error) {
	var v triage.LedgerView
	err := s.View(ctx, func(tx Tx) error {
		r, err := tx.Ledger(key)
		if err != nil {
			return err
		}
		v = r.View()
		return nil
	})
	return v, err
}
