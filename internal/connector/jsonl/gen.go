package jsonl

import "github.com/replayctl/replayctl/internal/gen"

// GenFormat writes generated records as a JSON Lines export (internal/gen).
func GenFormat() gen.Format {
	return gen.LinesFormat(Kind, "jsonl entries", func(r gen.Record) map[string]any {
		return map[string]any{"id": r.ID, "topic": r.Topic, "reason_code": r.Reason, "message": r.Message,
			"attempts": r.Attempts, "idempotency_key": r.Key, "labels": r.Labels, "payload": r.Payload}
	})
}
