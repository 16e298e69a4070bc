package jsonl

import (
	"encoding/json"
	"fmt"

	"github.com/replayctl/replayctl/internal/gen"
)

// GenFormat writes generated records as a JSON Lines export (internal/gen);
// a malformed one is cut off mid-record.
func GenFormat() gen.Format {
	return gen.Format{Kind: Kind, Items: "jsonl entries", Line: func(r gen.Record) []byte {
		if r.Malformed {
			return []byte(fmt.Sprintf(`{"id":%q,"topic":`+"\n", r.ID))
		}
		line, _ := json.Marshal(map[string]any{"id": r.ID, "topic": r.Topic, "reason_code": r.Reason, "message": r.Message,
			"attempts": r.Attempts, "idempotency_key": r.Key, "labels": r.Labels, "payload": r.Payload})
		return append(line, '\n')
	}}
}
