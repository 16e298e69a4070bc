package cordum

import (
	"encoding/json"
	"fmt"

	"github.com/replayctl/replayctl/internal/gen"
)

// GenFormat writes generated records as a Cordum DLQ dump, one DLQEntry a
// line (internal/gen); a malformed one is cut off mid-record.
func GenFormat() gen.Format {
	return gen.Format{Kind: Kind, Items: "Cordum entries", Line: func(r gen.Record) []byte {
		if r.Malformed {
			return []byte(fmt.Sprintf(`{"id":%q,"topic":`+"\n", r.ID))
		}
		line, _ := json.Marshal(map[string]any{"job_id": r.ID, "topic": r.Topic, "status": "FAILED", "reason_code": r.Reason,
			"reason": r.Message, "attempts": r.Attempts, "idempotency_key": r.Key, "labels": r.Labels,
			"replay_status": "pending_review", "failed_at": r.Failed, "payload": r.Payload})
		return append(line, '\n')
	}}
}
