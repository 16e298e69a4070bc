package nexora

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// Format is how Nexora dead-letter list responses are laid out and decoded.
func Format() records.Format {
	return records.Format{Kind: Kind, Layout: records.LayoutList, Decode: decodeNexora}
}

// nexoraRecord is one element of a Nexora dead-letter list response.
type nexoraRecord struct {
	ID             string            `json:"id"`
	ExecutionID    string            `json:"executionId"`
	Goal           json.RawMessage   `json:"goal"`
	Context        json.RawMessage   `json:"context"`
	FailureCode    string            `json:"failureCode"`
	FailureMessage string            `json:"failureMessage"`
	FailedAt       records.Timestamp `json:"failedAt"`
	ReviewState    string            `json:"reviewState"`
	ResolveReason  string            `json:"resolveReason"`
	Attempts       *int              `json:"attempts"`
}

// nexoraContext is the part of an intent context replayctl reads. The
// context is free-form (Map<String, Object>), so a field of another type is
// ignored rather than making the record undecodable.
type nexoraContext struct {
	Topic  json.RawMessage `json:"topic"`
	Labels json.RawMessage `json:"labels"`
}

func decodeNexora(raw []byte, e *entry.Entry, _ *records.StrictDecoder) error {
	var r nexoraRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	if r.ID == "" {
		return errors.New("missing id")
	}
	*e = entry.Entry{
		ID:          r.ID,
		ReasonCode:  r.FailureCode,
		Message:     r.FailureMessage,
		Attempts:    1,
		LastFailure: r.FailedAt.Time,
		State: entry.SourceState{
			Status: r.ReviewState,
			Handled: strings.EqualFold(r.ReviewState, "RESOLVED") ||
				strings.EqualFold(r.ReviewState, "REPLAYED"),
		},
		Payload: nexoraPayload(r.Goal, r.Context),
		Lineage: nexoraLineage(r.Goal, r.Context),
	}
	e.FirstFailure = e.LastFailure
	if r.Attempts != nil {
		e.Attempts = *r.Attempts
	}
	labels := map[string]string{}
	if len(r.Context) > 0 && r.Context[0] == '{' {
		var c nexoraContext
		if json.Unmarshal(r.Context, &c) == nil {
			if len(c.Topic) > 0 && c.Topic[0] == '"' {
				json.Unmarshal(c.Topic, &e.Topic)
			}
			if len(c.Labels) > 0 && c.Labels[0] == '{' {
				var l map[string]string
				if json.Unmarshal(c.Labels, &l) == nil {
					labels = l
				}
			}
		}
	}
	// What Nexora itself recorded wins over same-named context labels.
	if r.ExecutionID != "" {
		labels["execution_id"] = r.ExecutionID
	}
	if r.ResolveReason != "" {
		labels["resolve_reason"] = r.ResolveReason
	}
	if len(labels) > 0 {
		e.Labels = labels
	}
	return nil
}

// nexoraPayload is what `nexora dlq replay` resubmits: the goal and the
// context, each byte for byte as the record had it (null when absent).
func nexoraPayload(goal, context json.RawMessage) json.RawMessage {
	if !records.Present(goal) {
		goal = json.RawMessage("null")
	}
	if !records.Present(context) {
		context = json.RawMessage("null")
	}
	p := make([]byte, 0, len(goal)+len(context)+len(`{"goal":,"context":}`))
	p = append(p, `{"goal":`...)
	p = append(p, goal...)
	p = append(p, `,"context":`...)
	p = append(p, context...)
	p = append(p, '}')
	return p
}
