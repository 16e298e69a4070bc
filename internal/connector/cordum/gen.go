package cordum

import "github.com/replayctl/replayctl/internal/gen"

// GenFormat writes generated records as a Cordum DLQ dump, one DLQEntry a
// line (internal/gen).
func GenFormat() gen.Format {
	return gen.LinesFormat(Kind, "Cordum entries", func(r gen.Record) map[string]any {
		return map[string]any{"job_id": r.ID, "topic": r.Topic, "status": "FAILED", "reason_code": r.Reason,
			"reason": r.Message, "attempts": r.Attempts, "idempotency_key": r.Key, "labels": r.Labels,
			"replay_status": "pending_review", "failed_at": r.Failed, "payload": r.Payload}
	})
}
