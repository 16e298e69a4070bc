package entry

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// LineageLabel is the label (a header, for a system that keeps them) in
// which replayctl stamps the lineage on every replay it sends, so that the
// message, dead-lettered again, is linked to the entry it came from.
// ReplayCountLabel carries the replay's number in that lineage.
const (
	LineageLabel     = "replayctl-lineage"
	ReplayCountLabel = "replayctl-replay-count"
)

// OrderLabel, on an entry, names the sequence whose order its replays
// keep (a Kafka record's original topic and partition): a run never
// replays two entries with the same value at once, and starts them in the
// order it read them (replay/order.go).
// OrderPosLabel is the entry's place in that sequence (a decimal number:
// the record's original offset).
const (
	OrderLabel    = "replayctl.order"
	OrderPosLabel = "replayctl.order_pos"
)

// LineageOf is the entry's lineage: Lineage, else the lineage stamped on
// the message it came from (LineageLabel), else "".
func (e *Entry) LineageOf() string {
	if e.Lineage != "" {
		return e.Lineage
	}
	return e.Labels[LineageLabel]
}

// LineageStamp is the lineage a replay of the entry is stamped with
// (LineageLabel): its lineage, else its own ref, so that the entry is the
// first member of the lineage its replays come back in.
func (e *Entry) LineageStamp() string {
	return cmp.Or(e.LineageOf(), e.Ref())
}

// Entry is one dead-lettered record, normalised.
type Entry struct {
	// ID is the source-scoped identifier (Cordum job_id, Prodigy item_id,
	// Nexora id, JSONL id). For an undecodable record it names where the
	// record was (file:line, or the file), or, read from a running system,
	// the record's own id or a hash of its bytes.
	ID string `json:"id"`
	// Source is the source kind, as the connector that read the entry
	// names it (the KIND of --source KIND:PATH; connector/registry lists
	// them).
	Source string `json:"source"`
	// Origin says where the record was read: file:line, a file, a Redis key.
	Origin string `json:"origin,omitempty"`
	// Scope narrows the id space within a source kind where ids are only
	// unique per scope (Prodigy: the job id; item ids repeat across jobs).
	Scope string `json:"scope,omitempty"`
	// Lineage names the entry's replay lineage, computed at ingest by its
	// source: the entries a system created by replaying one another share
	// it (a Cordum job and its <id>-retry-<8hex> jobs, Nexora records of the
	// same goal and context, a message carrying replayctl's lineage header,
	// see LineageLabel), and max_replays counts across it. Empty: the entry
	// is a lineage of its own.
	Lineage string `json:"lineage,omitempty"`
	// Ancestors are the ids (in the same source and scope) of the entries
	// this one was created from by replays, nearest first, where the
	// source's ids say so (Cordum: "a-retry-1a2b3c4d" came from "a").
	Ancestors []string `json:"ancestors,omitempty"`

	Topic      string `json:"topic,omitempty"`
	ReasonCode string `json:"reason_code,omitempty"`
	Message    string `json:"message,omitempty"`
	Attempts   int    `json:"attempts"`

	// IdempotencyKey is preserved exactly as the source gave it; when the
	// source has none it is derived (see DeriveKey) and KeyDerived is set.
	IdempotencyKey string `json:"idempotency_key"`
	KeyDerived     bool   `json:"key_derived,omitempty"`

	FirstFailure time.Time         `json:"first_failure,omitzero"`
	LastFailure  time.Time         `json:"last_failure,omitzero"`
	Labels       map[string]string `json:"labels,omitempty"`
	State        SourceState       `json:"source_state,omitzero"`

	// Payload is what a replay sends, kept byte for byte as the source had it.
	Payload json.RawMessage `json:"payload,omitempty"`
	// History is the failure history, oldest first, where the source has one.
	History []Failure `json:"failure_history,omitempty"`

	// DecodeError is set when the record could not be decoded. Such an entry
	// is still yielded (never dropped) and triage quarantines it.
	DecodeError string `json:"decode_error,omitempty"`
}

// SourceState is what the source itself says about the entry's handling.
type SourceState struct {
	// Status is the source's own word for the state, verbatim
	// (Cordum replay_status, Nexora reviewState).
	Status string `json:"status,omitempty"`
	// Handled is true when the source says the entry was already dealt with
	// (Nexora RESOLVED/REPLAYED, Cordum replay_status replayed/resolved).
	Handled bool `json:"handled,omitempty"`
	// JobStatus is the system's own terminal status of the failed work,
	// verbatim (Cordum's DLQEntry.Status: JOB_STATUS_DENIED, ...). Triage
	// always reads it with the reason code: a status saying a person or a
	// policy refused the job, or that the job ran, overrides any message.
	JobStatus string `json:"job_status,omitempty"`
	// ManualReviewRequired is Prodigy's manual_review_required.
	ManualReviewRequired bool `json:"manual_review_required,omitempty"`
	// ReprocessIneligible is Prodigy's reprocess_eligible == false.
	ReprocessIneligible bool `json:"reprocess_ineligible,omitempty"`
	// PolicySnapshot is Cordum's policy_snapshot at failure time.
	PolicySnapshot string `json:"policy_snapshot,omitempty"`
	// ErrorSignature is Prodigy's error_signature (used to group failures).
	ErrorSignature string `json:"error_signature,omitempty"`
}

// Failure is one attempt in a failure history.
type Failure struct {
	Attempt    int       `json:"attempt,omitempty"`
	Time       time.Time `json:"time,omitzero"`
	ReasonCode string    `json:"reason_code,omitempty"`
	ErrorType  string    `json:"error_type,omitempty"`
	Message    string    `json:"message,omitempty"`
	Step       string    `json:"step,omitempty"`
}

// Ref is the entry's identity across sources: "kind:id", or
// "kind:scope/id" when the source scopes its ids. Two sources of the same
// kind share an id space, as they would in the system that wrote them.
func (e *Entry) Ref() string {
	if e.Scope != "" {
		return e.Source + ":" + e.Scope + "/" + e.ID
	}
	return e.Source + ":" + e.ID
}

// Undecodable reports whether the record could not be decoded.
func (e *Entry) Undecodable() bool { return e.DecodeError != "" }

// DeriveKey returns the idempotency key for an entry whose source has none:
// a hash of the source kind and the source-scoped id, so the same entry gets
// the same key on every run and every machine.
func DeriveKey(kind, id string) string {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return "replayctl:" + hex.EncodeToString(h.Sum(nil))[:32]
}

// EnsureKey fills in a derived idempotency key when the entry has none.
func (e *Entry) EnsureKey() {
	if e.IdempotencyKey == "" {
		e.IdempotencyKey = DeriveKey(e.Source, e.ID)
		e.KeyDerived = true
	}
}

// PayloadHash identifies the payload by the exact bytes a replay forwards
// (Payload is kept byte for byte as the source had it, and the store keeps
// it the same way), so that the same key arriving with a different payload
// can be told apart from a re-read. It hashes those bytes once, without
// re-formatting them: compacting every payload first made hashing 39% of a
// decision (issue 16). Two copies of one payload formatted differently
// therefore hash apart; they are different bytes at the target too.
func PayloadHash(p json.RawMessage) string {
	return hashString(sha256.Sum256(p))
}

// LegacyPayloadHash is the hash ledgers written before issue 16 stored: the
// sha256 of the payload after json.Compact (a payload that is not valid
// JSON hashed as it is). For a payload without insignificant white space it
// equals PayloadHash; it is only computed when a stored hash does not match.
func LegacyPayloadHash(p json.RawMessage) string {
	var buf bytes.Buffer
	body := []byte(p)
	if len(body) > 0 && json.Compact(&buf, body) == nil {
		body = buf.Bytes()
	}
	return hashString(sha256.Sum256(body))
}

// PayloadHashAgainst returns the hash to decide p with, given the hash a
// ledger stored for its key ("" when none): PayloadHash, unless stored is
// the legacy hash of these same bytes. Then stored is returned, so a ledger
// written before issue 16 keeps matching its own records (no "payload
// changed" conflict, no ErrPayloadMismatch on the next transition, no stale
// approval evidence) and no migration of the ledger is needed.
func PayloadHashAgainst(p json.RawMessage, stored string) string {
	h := PayloadHash(p)
	if stored != "" && stored != h && LegacyPayloadHash(p) == stored {
		return stored
	}
	return h
}

func hashString(sum [sha256.Size]byte) string {
	const prefix = "sha256:"
	var out [len(prefix) + 2*sha256.Size]byte
	copy(out[:], prefix)
	hex.Encode(out[len(prefix):], sum[:])
	return string(out[:])
}
