package cordum

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// Format is how Cordum DLQ dumps are laid out and decoded.
func Format() records.Format {
	return records.Format{Kind: Kind, Layout: records.LayoutSniffed, Decode: decodeCordum,
		// Cordum's DLQEntry job_id (cordum-io/cordum core/infra/store/dlq_store.go)
		IDFields: []string{"job_id", "id"}}
}

// cordumRecord is a Cordum DLQ entry (dlq:entry:<jobID>).
type cordumRecord struct {
	JobID          string            `json:"job_id"`
	Topic          string            `json:"topic"`
	Status         string            `json:"status"`
	ReasonCode     string            `json:"reason_code"`
	Reason         string            `json:"reason"`
	Attempts       int               `json:"attempts"`
	IdempotencyKey string            `json:"idempotency_key"`
	PolicySnapshot string            `json:"policy_snapshot"`
	ReplayStatus   string            `json:"replay_status"`
	Labels         map[string]string `json:"labels"`
	Payload        json.RawMessage   `json:"payload"`
	Request        json.RawMessage   `json:"request"`
	CreatedAt      records.Timestamp `json:"created_at"`
	FailedAt       records.Timestamp `json:"failed_at"`
	UpdatedAt      records.Timestamp `json:"updated_at"`
}

func decodeCordum(raw []byte, e *entry.Entry, _ *records.StrictDecoder) error {
	var r cordumRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	if r.JobID == "" {
		return errors.New("missing job_id")
	}
	*e = entry.Entry{
		ID:             r.JobID,
		Topic:          r.Topic,
		ReasonCode:     ReasonCode(r.ReasonCode, r.Status),
		Message:        r.Reason,
		Attempts:       r.Attempts,
		IdempotencyKey: r.IdempotencyKey,
		State: entry.SourceState{
			Status:         r.ReplayStatus,
			JobStatus:      r.Status,
			Handled:        records.HandledStatus(r.ReplayStatus),
			PolicySnapshot: r.PolicySnapshot,
		},
	}
	e.Lineage, e.Ancestors = cordumLineage(r.JobID), cordumAncestors(r.JobID)
	if len(r.Labels) > 0 {
		e.Labels = r.Labels
	}
	switch {
	case records.Present(r.Payload):
		e.Payload = r.Payload
	case records.Present(r.Request):
		e.Payload = r.Request
	default:
		// Nothing says which part is the request: replay the record itself.
		e.Payload = bytes.Clone(raw)
	}
	// created_at and failed_at both mark the failure; updated_at may only
	// be a later replay_status change, so it counts only when alone.
	e.FirstFailure, e.LastFailure = records.Span(r.CreatedAt.Time, r.FailedAt.Time)
	if e.LastFailure.IsZero() {
		e.FirstFailure, e.LastFailure = r.UpdatedAt.Time, r.UpdatedAt.Time
	}
	return nil
}

// ReasonCode is the entry's reason code, or, when Cordum wrote none,
// its terminal job status (JOB_STATUS_TIMEOUT, JOB_STATUS_CANCELLED, ...;
// cordum-io/cordum core/infra/store/dlq_store.go DLQEntry.Status), which the
// taxonomy classifies. A bare "FAILED" says nothing and is not used.
func ReasonCode(code, status string) string {
	if code != "" {
		return code
	}
	if strings.HasPrefix(strings.ToUpper(status), "JOB_STATUS_") {
		return status
	}
	return ""
}
