package store

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/replayctl/replayctl/internal/triage"
)

// Approval states.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
	ApprovalExpired  = "expired"
	ApprovalStale    = "stale" // the evidence changed after it was asked
)

// Approval is a request for a person of ApproverGroup to allow a replay.
// It is bound to the evidence it was asked on.
type Approval struct {
	ID            string          `json:"id"`
	EntryRef      string          `json:"entry_ref"`
	EntryID       string          `json:"entry_id"`
	Source        string          `json:"source"`
	Key           string          `json:"idempotency_key"`
	ApproverGroup string          `json:"approver_group"`
	State         string          `json:"state"`
	Evidence      string          `json:"evidence_hash"`
	Decision      triage.Decision `json:"decision"`
	RequestedBy   string          `json:"requested_by"`
	// RerequestedBy are those who asked again after a request expired or
	// went stale (a person, or the scheduler's run): the replacement keeps
	// RequestedBy, and four-eyes refuses all of them.
	RerequestedBy []string  `json:"rerequested_by,omitempty"`
	RequestedAt   time.Time `json:"requested_at"`
	ExpiresAt     time.Time `json:"expires_at,omitzero"`
	DecidedBy     string    `json:"decided_by,omitempty"`
	DecidedAt     time.Time `json:"decided_at,omitzero"`
	Reason        string    `json:"reason,omitempty"`
	// Used is set once the approved replay was dispatched.
	Used bool `json:"used,omitempty"`
}

// ApprovalID is deterministic: the same entry asked on the same evidence
// gets the same request, so reconciling twice never asks twice.
func ApprovalID(entryRef, evidence string) string {
	sum := sha256.Sum256([]byte(entryRef + "\x00" + evidence))
	return "apr_" + hex.EncodeToString(sum[:])[:16]
}
