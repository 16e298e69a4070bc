package nexora

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/replayctl/replayctl/internal/gen"
)

// GenFormat writes generated records as a Nexora dead-letter list,
// {"items": [DeadLetterRecord, ...]} (internal/gen); a malformed record
// has a field of the wrong type (an array cannot resynchronise).
func GenFormat() gen.Format {
	return gen.Format{Kind: Kind, Items: "Nexora records", Head: `{"items":[` + "\n", Sep: ",\n", Tail: "\n],\"page\":0,\"size\":0}\n",
		Line: func(r gen.Record) []byte {
			if r.Malformed {
				return []byte(fmt.Sprintf(`{"id":%q,"failureCode":17}`, r.ID))
			}
			line, _ := json.Marshal(map[string]any{"id": r.ID, "executionId": "exec-" + r.ID, "goal": r.Message,
				"context": json.RawMessage(r.Payload), "failureCode": strings.ToUpper(r.Reason), "failureMessage": r.Message,
				"failedAt": r.Failed, "reviewState": "PENDING"})
			return line
		}}
}
