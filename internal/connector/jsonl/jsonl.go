package jsonl

import (
	"encoding/json"
	"errors"

	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// Format is replayctl's own JSON Lines format.
func Format() records.Format {
	return records.Format{Kind: Kind, Layout: records.LayoutLines, Decode: decodeJSONL}
}

// jsonlRecord is one line of replayctl's own format. It is decoded strictly:
// a field replayctl does not know is a mistake worth reporting.
type jsonlRecord struct {
	ID             string            `json:"id"`
	Topic          string            `json:"topic"`
	ReasonCode     string            `json:"reason_code"`
	Message        string            `json:"message"`
	Attempts       int               `json:"attempts"`
	IdempotencyKey string            `json:"idempotency_key"`
	Labels         map[string]string `json:"labels"`
	Payload        json.RawMessage   `json:"payload"`
	FirstFailure   records.Timestamp `json:"first_failure"`
	LastFailure    records.Timestamp `json:"last_failure"`
	SourceState    string            `json:"source_state"`
}

// decodeJSONL decodes a line through the fast path (fast.go) when it is
// sure of the line, else through the strict decoder.
func decodeJSONL(raw []byte, e *entry.Entry, strict *records.StrictDecoder) error {
	if decodeFast(raw, e) {
		return nil
	}
	return decodeStrict(raw, e, strict)
}

// decodeStrict decodes a line through encoding/json, unknown fields
// refused.
func decodeStrict(raw []byte, e *entry.Entry, strict *records.StrictDecoder) error {
	var r jsonlRecord
	if err := strict.Decode(raw, &r); err != nil {
		return err
	}
	if r.ID == "" {
		return errors.New("missing id")
	}
	*e = entry.Entry{
		ID:             r.ID,
		Topic:          r.Topic,
		ReasonCode:     r.ReasonCode,
		Message:        r.Message,
		Attempts:       r.Attempts,
		IdempotencyKey: r.IdempotencyKey,
		State: entry.SourceState{
			Status:  r.SourceState,
			Handled: records.HandledStatus(r.SourceState),
		},
	}
	if len(r.Labels) > 0 {
		e.Labels = r.Labels
	}
	if records.Present(r.Payload) {
		e.Payload = r.Payload
	}
	e.FirstFailure, e.LastFailure = records.OrBoth(r.FirstFailure.Time, r.LastFailure.Time)
	return nil
}
