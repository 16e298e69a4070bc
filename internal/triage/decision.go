package triage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
)

// Decision is the value triage produces for one entry. It holds everything
// needed to act on the entry and to explain the choice later.
type Decision struct {
	EntryID        string `json:"entry_id"`
	EntryRef       string `json:"entry_ref"`
	Source         string `json:"source"`
	Origin         string `json:"origin,omitempty"`
	Topic          string `json:"topic,omitempty"`
	IdempotencyKey string `json:"idempotency_key"`
	PayloadHash    string `json:"payload_hash"`

	Class        Class  `json:"class"`
	Unrecognised bool   `json:"unrecognised,omitempty"`
	ReasonCode   string `json:"reason_code"`

	// Rule is the matched rule's id, or "default:<class>" when none matched.
	Rule           string `json:"rule"`
	ProposedAction Action `json:"proposed_action"`
	// PolicyAction is what the policy asked for ("" when it was not asked).
	PolicyAction Action   `json:"policy_action,omitempty"`
	PolicyError  string   `json:"policy_error,omitempty"`
	Action       Action   `json:"action"`
	Reasons      []string `json:"reasons"`
	// KeyLifetimeExceeded: the entry is older than its target's
	// key_lifetime, so a replay needs a person (the reason says by how much).
	KeyLifetimeExceeded bool `json:"key_lifetime_exceeded,omitempty"`

	Owner         string  `json:"owner,omitempty"`
	ApproverGroup string  `json:"approver_group,omitempty"`
	MaxReplays    int     `json:"max_replays"`
	Backoff       Backoff `json:"backoff"`

	Ledger         LedgerView `json:"ledger"`
	PolicySnapshot string     `json:"policy_snapshot"`
	// GroupHold is the failure group's hold that made the entry wait: an
	// input of the decision, recorded so `audit replay-decision` re-runs
	// it with the same hold.
	GroupHold *GroupHold `json:"group_hold,omitempty"`
	// EvidenceHash binds an approval to what it approved: entry, payload,
	// class, rule, proposed action and policy snapshot.
	EvidenceHash string `json:"evidence_hash"`
}

// LedgerView is what the idempotency ledger knows of a key when deciding.
// The zero value means the ledger has never seen the key.
type LedgerView struct {
	State       string `json:"state,omitempty"`
	Replays     int    `json:"replays,omitempty"`
	PayloadHash string `json:"payload_hash,omitempty"`
	// Approved is set when a person approved this key's current evidence.
	Approved bool `json:"approved,omitempty"`
	// Probe is the result of a compensating read made before deciding
	// (ProbeCommitted, ProbeNotCommitted, ProbeInconclusive), "" when none.
	Probe string `json:"probe,omitempty"`
	// Lineage names the entry's replay lineage ("" when it has none) and
	// LineageReplays is what the whole lineage (this key included) has
	// used of max_replays since its budget was last released.
	Lineage        string `json:"lineage,omitempty"`
	LineageReplays int    `json:"lineage_replays,omitempty"`
	// FirstDispatch is when the key was first dispatched (zero: never).
	FirstDispatch time.Time `json:"first_dispatch,omitzero"`
	// At is the time the decision is made for, injected by the caller
	// (Engine.Now) and recorded with the view, so that a re-run of the
	// decision judges the key's age as it was. Zero: no clock was given and
	// the key-lifetime guard is not applied.
	At time.Time `json:"at,omitzero"`
}

// Used is the count max_replays is held against: the key's own replays,
// or its lineage's when that is more.
func (v LedgerView) Used() int { return max(v.Replays, v.LineageReplays) }

// Probe results a LedgerView can carry.
const (
	ProbeCommitted    = "committed"
	ProbeNotCommitted = "not_committed"
	ProbeInconclusive = "inconclusive"
)

// Ledger states seen by triage (the ledger package owns the state machine).
const (
	StateDecided        = "decided"
	StateDispatching    = "dispatching"
	StateSucceeded      = "succeeded"
	StateFailed         = "failed"
	StateOutcomeUnknown = "outcome_unknown"
)

func (d *Decision) because(reason string) { d.Reasons = append(d.Reasons, reason) }

// escalate moves the action to a, if a is stricter, giving the reason.
func (d *Decision) escalate(a Action, reason string) {
	if Stricter(d.Action, a) != d.Action {
		d.Action = a
	}
	d.because(reason)
}

// evidenceHash covers what an approver looked at: the entry (its key,
// payload, reason, topic and labels), its class, the matched rule, the
// proposed action and the policy snapshot. Attempts are left out: the same
// entry read again must not make its approval stale.
func evidenceHash(d *Decision, e *entry.Entry) string {
	h := sha256.New()
	parts := []string{d.EntryRef, d.IdempotencyKey, d.PayloadHash, d.ReasonCode, e.Topic,
		string(d.Class), d.Rule, string(d.ProposedAction), d.PolicySnapshot}
	keys := make([]string, 0, len(e.Labels))
	for k := range e.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k, e.Labels[k]) // separate parts: "a=b"/"c" differs from "a"/"b=c"
	}
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

type backoffJSON struct {
	Strategy   string  `json:"strategy"`
	Initial    string  `json:"initial"`
	Max        string  `json:"max"`
	Multiplier float64 `json:"multiplier"`
}

// MarshalJSON writes durations as Go duration strings ("1s"), as in rules.yaml.
func (b Backoff) MarshalJSON() ([]byte, error) {
	return json.Marshal(backoffJSON{b.Strategy, b.Initial.String(), b.Max.String(), b.Multiplier})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (b *Backoff) UnmarshalJSON(data []byte) error {
	var j backoffJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	b.Strategy, b.Multiplier = j.Strategy, j.Multiplier
	var err error
	if b.Initial, err = parseDuration(j.Initial); err != nil {
		return err
	}
	b.Max, err = parseDuration(j.Max)
	return err
}

func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}
