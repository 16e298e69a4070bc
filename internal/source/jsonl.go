package source

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

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

func decodeJSONL(raw []byte, e *entry.Entry) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var r jsonlRecord
	if err := dec.Decode(&r); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the record")
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
