package source

import (
	"encoding/json"
	"errors"

	"github.com/replayctl/replayctl/internal/entry"
)

func jsonlFormat() format {
	return format{kind: entry.KindJSONL, layout: layoutLines, decode: decodeJSONL}
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
	FirstFailure   timestamp         `json:"first_failure"`
	LastFailure    timestamp         `json:"last_failure"`
	SourceState    string            `json:"source_state"`
}

func decodeJSONL(raw []byte, e *entry.Entry, strict *strictDecoder) error {
	var r jsonlRecord
	if err := strict.decode(raw, &r); err != nil {
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
			Handled: handledStatus(r.SourceState),
		},
	}
	if len(r.Labels) > 0 {
		e.Labels = r.Labels
	}
	if present(r.Payload) {
		e.Payload = r.Payload
	}
	e.FirstFailure, e.LastFailure = orBoth(r.FirstFailure.Time, r.LastFailure.Time)
	return nil
}
