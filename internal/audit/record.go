package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/triage"
)

// Kinds of audit records.
const (
	KindDecision   = "decision"    // triage decided an entry (with the decision)
	KindDispatch   = "dispatch"    // intent to replay written (ledger -> dispatching)
	KindOutcome    = "outcome"     // a replay's outcome (succeeded, failed, outcome_unknown, retry)
	KindRecovery   = "recovery"    // dispatching found on start, turned outcome_unknown
	KindProbe      = "probe"       // compensating read of an unknown-commit key
	KindResolve    = "resolve"     // a person resolved an entry
	KindRelease    = "release"     // a person released an entry from quarantine
	KindApproval   = "approval"    // an approval was requested or decided
	KindWriteBack  = "write_back"  // the source was told the entry was replayed
	KindBulk       = "bulk"        // a bulk operation (filter, counts)
	KindIngestSkip = "ingest_skip" // reserved
	KindBreaker    = "breaker"     // a target's circuit breaker changed state
	KindGroup      = "group"       // a failure group's lifecycle changed (ack, hold, release, resolve, expiry)
)

// Record is one audit record. Seq is its place in the chain and also the
// decision id users refer to.
type Record struct {
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Actor    string    `json:"actor"`
	Kind     string    `json:"kind"`
	EntryRef string    `json:"entry_ref,omitempty"`
	EntryID  string    `json:"entry_id,omitempty"`
	Source   string    `json:"source,omitempty"`
	Key      string    `json:"idempotency_key,omitempty"`

	Decision *triage.Decision `json:"decision,omitempty"`
	// Input is the entry a decision was made on, without its payload (the
	// decision keeps the payload's hash), so it can be re-run later.
	Input          *entry.Entry  `json:"input,omitempty"`
	Action         triage.Action `json:"action,omitempty"`
	Reason         string        `json:"reason,omitempty"`
	PolicySnapshot string        `json:"policy_snapshot,omitempty"`
	// SnapshotKept says the store held PolicySnapshot when it appended
	// the record: from the first such record on, a missing snapshot was
	// deleted, whatever the store's unsigned kept-from marker says (the
	// chain covers this flag; it covered nothing of the marker).
	SnapshotKept bool            `json:"snapshot_kept,omitempty"`
	LedgerBefore string          `json:"ledger_before,omitempty"`
	LedgerAfter  string          `json:"ledger_after,omitempty"`
	Outcome      string          `json:"outcome,omitempty"`
	Detail       json.RawMessage `json:"detail,omitempty"`

	// prep is the body encoded ahead (Prepare); not part of the record.
	prep *Prepared
}

// ID is the user-facing decision id.
func (r *Record) ID() string { return strconv.FormatUint(r.Seq, 10) }

// Sealed is a record as stored: its exact bytes and the chain hashes.
type Sealed struct {
	Seq  uint64          `json:"seq"`
	Prev string          `json:"prev"`
	Hash string          `json:"hash"`
	Body json.RawMessage `json:"body"`
}

// Genesis is the Prev of the first record.
const Genesis = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// Seal encodes r (with its Seq already set) and chains it to prev.
// A record prepared ahead (Prepare) and unchanged since is not encoded
// again: its seq and time are written before the prepared rest.
func Seal(r *Record, prev string) (Sealed, error) {
	body, err := r.preparedBody()
	if body == nil && err == nil {
		body, err = json.Marshal(r)
	}
	if err != nil {
		return Sealed{}, fmt.Errorf("encode audit record: %w", err)
	}
	return Sealed{Seq: r.Seq, Prev: prev, Hash: chainHash(r.Seq, prev, body), Body: body}, nil
}

// Link chains a record already encoded (its body written before its place
// in the chain was known, as a shared store's writers do) to prev.
func Link(seq uint64, prev string, body []byte) Sealed {
	return Sealed{Seq: seq, Prev: prev, Hash: chainHash(seq, prev, body), Body: body}
}

// chainHash is "sha256:" and the hex SHA-256 of seq, prev and body
// ("%d\n%s\n" then body), hashed from one pooled buffer: a digest and
// fmt's formatting were five allocations per record inside the store's
// write lock (issue 33).
func chainHash(seq uint64, prev string, body []byte) string {
	bp := hashBuffers.Get().(*[]byte)
	b := strconv.AppendUint((*bp)[:0], seq, 10)
	b = append(b, '\n')
	b = append(b, prev...)
	b = append(b, '\n')
	b = append(b, body...)
	sum := sha256.Sum256(b)
	if *bp = b; cap(b) <= 1<<20 {
		hashBuffers.Put(bp)
	}
	var out [len("sha256:") + 2*sha256.Size]byte
	copy(out[:], "sha256:")
	hex.Encode(out[len("sha256:"):], sum[:])
	return string(out[:])
}

// hashBuffers holds scratch for chainHash and Prepare (safe for
// concurrent use, never holding a record's bytes past the call).
var hashBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// Open decodes a sealed record's body.
func (s *Sealed) Open() (Record, error) {
	var r Record
	if err := json.Unmarshal(s.Body, &r); err != nil {
		return Record{}, fmt.Errorf("audit record %d: %w", s.Seq, err)
	}
	return r, nil
}

// Break describes the first place the chain does not hold.
type Break struct {
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
}

func (b *Break) Error() string {
	return fmt.Sprintf("audit chain broken at record %d: %s", b.Seq, b.Reason)
}

// ErrBlobChanged says content a record refers to by its hash (a policy
// snapshot) no longer hashes to it: it was changed where it is stored.
var ErrBlobChanged = errors.New("stored content does not hash to its address")

// MissingBlobError says a snapshot a record refers to is not stored,
// though the store has kept every snapshot for the records from From on
// (a marker written with the first snapshot this version stored): for
// those records it was deleted. Records before From were written by a
// version that did not keep every snapshot; a missing one is no error.
// The marker is not covered by the chain, so From (NeverKept when there
// is no marker) only widens what the chain says: from the first record
// flagged SnapshotKept on, a missing snapshot was deleted whatever it is.
type MissingBlobError struct{ From uint64 }

// NeverKept is MissingBlobError.From of a store with no kept-from marker.
const NeverKept = ^uint64(0)

func (e *MissingBlobError) Error() string {
	if e.From == NeverKept {
		return "not stored, and the store has no record of keeping snapshots"
	}
	return fmt.Sprintf("not stored, though every snapshot is kept for records from %d on", e.From)
}

// BlobChecker is a Reader that keeps content records refer to by hash,
// stored once (policy snapshots: the rules and policy text a decision ran
// with, which `audit replay-decision` re-runs). The chain covers the hash;
// CheckSnapshot checks that the stored content still matches it. It
// returns nil when the snapshot is intact or not stored in a store that
// never kept every snapshot (a file written before this version), a
// *MissingBlobError when it is not stored though the store keeps them, an
// error wrapping ErrBlobChanged when it no longer hashes to id, another
// error when it cannot be read.
type BlobChecker interface {
	CheckSnapshot(ctx context.Context, id string) error
}

// Verifier checks records one at a time, in stored order.
type Verifier struct {
	prev    string
	nextSeq uint64
	n       int
	// blobs, when set, checks the content a record refers to by hash,
	// once per distinct hash.
	blobs   func(id string) error
	checked map[string]bool
	// missing holds, per snapshot found missing, the first record from
	// which it must have been stored (MissingBlobError.From).
	missing map[string]uint64
	// Missing counts the records naming a snapshot deleted from the
	// store; firstMissing is the first of them.
	Missing      int
	firstMissing *Break
	// keptFrom is the first record flagged SnapshotKept (0: none yet).
	keptFrom uint64
	// succeeded, when set (a full walk of a store with a ledger), holds
	// per idempotency key the first record saying its replay succeeded.
	succeeded map[string]uint64
}

// NewVerifier starts at the genesis.
func NewVerifier() *Verifier { return &Verifier{prev: Genesis, nextSeq: 1} }

// Next checks one stored record (its key seq and value).
func (v *Verifier) Next(keySeq uint64, s Sealed) *Break {
	switch {
	case keySeq != v.nextSeq:
		return &Break{Seq: keySeq, Reason: fmt.Sprintf("expected record %d here (deleted or reordered)", v.nextSeq)}
	case s.Seq != keySeq:
		return &Break{Seq: keySeq, Reason: fmt.Sprintf("record claims seq %d (moved)", s.Seq)}
	case s.Prev != v.prev:
		return &Break{Seq: keySeq, Reason: "previous-hash link does not match (a record before it changed or was removed)"}
	case chainHash(s.Seq, s.Prev, s.Body) != s.Hash:
		return &Break{Seq: keySeq, Reason: "content does not match its hash (changed)"}
	}
	rec, err := s.Open()
	if err != nil {
		return &Break{Seq: keySeq, Reason: err.Error()}
	}
	if rec.SnapshotKept && v.keptFrom == 0 {
		v.keptFrom = keySeq
	}
	if id := rec.PolicySnapshot; v.blobs != nil && id != "" && !v.checked[id] {
		var gone *MissingBlobError
		if err := v.blobs(id); errors.As(err, &gone) {
			if v.missing == nil {
				v.missing = map[string]uint64{}
			}
			v.missing[id] = gone.From
		} else if err != nil {
			if errors.Is(err, ErrBlobChanged) {
				return &Break{Seq: keySeq, Reason: fmt.Sprintf("policy snapshot %s it refers to was changed: %v", id, err)}
			}
			return &Break{Seq: keySeq, Reason: fmt.Sprintf("policy snapshot %s it refers to cannot be read: %v", id, err)}
		}
		if v.checked == nil {
			v.checked = map[string]bool{}
		}
		v.checked[id] = true
	}
	if v.succeeded != nil && rec.Key != "" && rec.LedgerAfter == StateSucceeded {
		if _, ok := v.succeeded[rec.Key]; !ok {
			v.succeeded[rec.Key] = keySeq
		}
	}
	// Counted per record, not per snapshot: every record written since
	// snapshots are kept that names a deleted one lost its re-run.
	if from, ok := v.missing[rec.PolicySnapshot]; ok && (keySeq >= from || v.keptFrom > 0 && keySeq >= v.keptFrom) {
		v.Missing++
		if v.firstMissing == nil {
			v.firstMissing = &Break{Seq: keySeq, Reason: fmt.Sprintf("policy snapshot %s it refers to was deleted from the store", rec.PolicySnapshot)}
		}
	}
	v.prev, v.nextSeq = s.Hash, v.nextSeq+1
	v.n++
	return nil
}

// MissingBreak reports the records naming a deleted snapshot as a break
// at the first of them (nil when there are none).
func (v *Verifier) MissingBreak() *Break {
	if v.firstMissing == nil {
		return nil
	}
	b := *v.firstMissing
	b.Reason += fmt.Sprintf(" (%d record(s) written since snapshots are kept name a deleted snapshot; `audit replay-decision` cannot re-run them)", v.Missing)
	return &b
}

// Head is the hash of the last verified record.
func (v *Verifier) Head() string { return v.prev }

// Count is how many records verified.
func (v *Verifier) Count() int { return v.n }

// ReplayProposal says how a decision record counts in the denial figures
// (stats, the counters, the console and replayctl_replays_denied_total
// alike): proposed when rules proposed an auto replay, denied when the
// final action was another. A skip (already committed, handled at the
// source) is neither: nothing was left to replay.
func (r *Record) ReplayProposal() (proposed, denied bool) {
	if r.Kind != KindDecision || r.Decision == nil || r.Decision.ProposedAction != triage.AutoReplay || r.Action == triage.Skip {
		return false, false
	}
	return true, r.Action != triage.AutoReplay
}
