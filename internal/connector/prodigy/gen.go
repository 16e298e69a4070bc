package prodigy

import (
	"encoding/json"
	"path/filepath"

	"github.com/replayctl/replayctl/internal/gen"
)

// GenFormat writes generated records as one Prodigy job's DLQ item files,
// JOB/items/ITEM.json (internal/gen); a malformed item is cut off.
func GenFormat() gen.Format {
	types := []any{"Timeout", map[string]any{"CommandFailed": map[string]any{"exit_code": 101}}, "ValidationFailed", "MergeConflict", "PermissionError", "Unknown"}
	return gen.Format{Kind: Kind, Items: "Prodigy items",
		ItemsDir: filepath.Join("bench", "mapreduce-1", "mapreduce", "dlq", "mapreduce-1", "items"),
		Item: func(i int, r gen.Record) (string, []byte) {
			if r.Malformed {
				return r.ID + ".json", []byte(`{"item_id": "` + r.ID)
			}
			data, _ := json.Marshal(map[string]any{"item_id": r.ID, "item_data": r.Payload, "first_attempt": r.Failed, "last_attempt": r.Failed,
				"failure_count": r.Attempts, "failure_history": []any{map[string]any{"attempt_number": 1, "timestamp": r.Failed,
					"error_type": types[i%len(types)], "error_message": r.Message}}, "error_signature": r.Reason,
				"reprocess_eligible": true, "manual_review_required": false})
			return r.ID + ".json", data
		}}
}
