package idempotency

import (
	"errors"
	"fmt"
	"time"

	"github.com/replayctl/replayctl/internal/triage"
)

// State of a key in the ledger. The zero value is "no record".
type State string

// The ledger states.
const (
	None           State = ""
	Decided        State = triage.StateDecided
	Dispatching    State = triage.StateDispatching
	Succeeded      State = triage.StateSucceeded
	Failed         State = triage.StateFailed
	OutcomeUnknown State = triage.StateOutcomeUnknown
)

// Sentinel errors of the ledger.
var (
	// ErrConflict: the key was not in the expected state (another worker
	// moved it, or the caller's view is stale). Nothing was written.
	ErrConflict = errors.New("ledger: state changed concurrently")
	// ErrIllegal: the transition is not part of the state machine.
	ErrIllegal = errors.New("ledger: transition not allowed")
	// ErrPayloadMismatch: the key is known with a different payload.
	ErrPayloadMismatch = errors.New("ledger: idempotency key already used with a different payload")
)

var allowed = map[State][]State{
	None:           {Decided},
	Decided:        {Decided, Dispatching, Succeeded},
	Dispatching:    {Succeeded, Failed, OutcomeUnknown, Decided},
	Failed:         {Decided},            // a person released it
	OutcomeUnknown: {Succeeded, Decided}, // a probe found it committed, or a person decided
	Succeeded:      {},                   // terminal: never dispatched again
}

// CanTransition reports whether from -> to is part of the state machine.
func CanTransition(from, to State) bool {
	for _, s := range allowed[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Record is what the ledger holds for one idempotency key.
type Record struct {
	Key         string    `json:"key"`
	State       State     `json:"state"`
	EntryRef    string    `json:"entry_ref"`
	PayloadHash string    `json:"payload_hash"`
	Replays     int       `json:"replays"`
	LastError   string    `json:"last_error,omitempty"`
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
	// Dispatched is when the current or last dispatch started.
	Dispatched time.Time `json:"dispatched,omitzero"`
	// FirstDispatched is when the first dispatch started: a target's
	// key_lifetime counts from it.
	FirstDispatched time.Time `json:"first_dispatched,omitzero"`
	// Owner is the process instance that made the current or last
	// dispatch (host:pid:nonce). Recovery only touches a dispatching record
	// whose owner is gone, never one still in flight.
	Owner string `json:"owner,omitempty"`
	// Rearmed is how many of Replays were made before a person last
	// re-armed the key (`dlq release`): max_replays counts from there.
	Rearmed int `json:"rearmed,omitempty"`
	// NotSent is how many of Replays provably never reached the target
	// (connection refused, DNS or TLS failure, request not fully written):
	// they keep their attempt number, so fencing stays monotonic, but an
	// outage cannot spend max_replays with them.
	NotSent int `json:"not_sent,omitempty"`
}

// View is what triage needs of a record.
func (r *Record) View() triage.LedgerView {
	if r == nil {
		return triage.LedgerView{}
	}
	return triage.LedgerView{State: string(r.State), Replays: r.Budget(), PayloadHash: r.PayloadHash, FirstDispatch: r.firstDispatch()}
}

// firstDispatch is when the key was first dispatched. A record written
// before FirstDispatched existed gives its creation (the first decision,
// just before its first dispatch): older than the truth, so the
// key-lifetime guard errs towards asking a person.
func (r *Record) firstDispatch() time.Time {
	if !r.FirstDispatched.IsZero() || r.Replays == 0 {
		return r.FirstDispatched
	}
	return r.Created
}

// Budget is the replays that count against max_replays: those that may
// have reached the target since the key was last re-armed.
func (r *Record) Budget() int {
	return max(r.Replays-r.NotSent-r.Rearmed, 0)
}

// Transition asks the ledger to move Key from From to To, atomically.
type Transition struct {
	Key         string
	From        State
	To          State
	EntryRef    string
	PayloadHash string
	// Error is kept as the record's last error (outcomes).
	Error string
	// Owner names the dispatching process instance: set on the record when
	// To is Dispatching; when From is Dispatching and Owner is set, the
	// record must still belong to it.
	Owner string
	// Attempt, when From is Dispatching and Attempt > 0, must equal the
	// record's replay count: an outcome is booked only against the attempt
	// it belongs to, never against a later one.
	Attempt int
	// Rearm, set by a person's release, restarts the max_replays count.
	Rearm bool
	// NotSent, on an outcome (Dispatching -> Decided), says the attempt
	// provably never reached the target: it is not counted in Budget.
	NotSent bool
}

// Apply computes the next record from the current one (nil when the key
// has no record), enforcing the compare-and-set and the state machine.
// Backends call it inside their transaction, so the rules live in one place.
func Apply(cur *Record, t Transition, now time.Time) (Record, error) {
	curState := None
	if cur != nil {
		curState = cur.State
	}
	if curState != t.From {
		return Record{}, fmt.Errorf("%w: key %s is %s, expected %s", ErrConflict, t.Key, show(curState), show(t.From))
	}
	if curState == Dispatching && (t.Attempt > 0 && cur.Replays != t.Attempt || t.Owner != "" && cur.Owner != t.Owner) {
		return Record{}, fmt.Errorf("%w: key %s is dispatching attempt %d by %s, not attempt %d by %s",
			ErrConflict, t.Key, cur.Replays, orUnknown(cur.Owner), t.Attempt, orUnknown(t.Owner))
	}
	if !CanTransition(t.From, t.To) {
		return Record{}, fmt.Errorf("%w: %s -> %s", ErrIllegal, show(t.From), show(t.To))
	}
	next := Record{Key: t.Key, Created: now}
	if cur != nil {
		next = *cur
		if t.PayloadHash != "" && cur.PayloadHash != "" && cur.PayloadHash != t.PayloadHash {
			return Record{}, fmt.Errorf("%w (key %s)", ErrPayloadMismatch, t.Key)
		}
	}
	next.State, next.Updated = t.To, now
	if next.EntryRef == "" {
		next.EntryRef = t.EntryRef
	}
	if next.PayloadHash == "" {
		next.PayloadHash = t.PayloadHash
	}
	if t.To == Dispatching {
		next.Replays++
		next.Dispatched = now
		if next.FirstDispatched.IsZero() {
			next.FirstDispatched = now
		}
		next.Owner = t.Owner
	}
	if t.NotSent {
		if curState != Dispatching || t.To != Decided {
			return Record{}, fmt.Errorf("%w: not_sent is only an outcome of a dispatch (dispatching -> decided), not %s -> %s",
				ErrIllegal, show(curState), show(t.To))
		}
		next.NotSent++
	}
	if t.Rearm {
		// Budget counts from here: the attempts that reached the target so far.
		next.Rearmed = next.Replays - next.NotSent
	}
	next.LastError = t.Error
	return next, nil
}

func show(s State) string {
	if s == None {
		return "(none)"
	}
	return string(s)
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown owner)"
	}
	return s
}
