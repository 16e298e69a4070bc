package replay

import (
	"strconv"
	"time"

	"github.com/replayctl/replayctl/internal/jsonenc"
)

// outcomeDetail is the outcome record's detail: the JSON object
// encoding/json makes of {"target", "attempt", "status", and when set
// "new_job_id" and "next_attempt_at"} (keys sorted, strings escaped as
// it escapes them), built without a map or reflection: it is made once
// per dispatch.
func outcomeDetail(target string, attempt, status int, newJobID string, due time.Time) []byte {
	b := make([]byte, 0, 64+len(target)+len(newJobID))
	b = append(b, `{"attempt":`...)
	b = strconv.AppendInt(b, int64(attempt), 10)
	if newJobID != "" {
		b = append(b, `,"new_job_id":`...)
		b = jsonenc.AppendString(b, newJobID)
	}
	if !due.IsZero() {
		if y := due.Year(); y < 0 || y > 9999 {
			return nil // encoding/json refuses it: no detail, as before
		}
		b = append(b, `,"next_attempt_at":"`...)
		b = due.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"target":`...)
	b = jsonenc.AppendString(b, target)
	return append(b, '}')
}
