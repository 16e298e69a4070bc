package replay

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
)

// TestCordumProbeCannotPagePastOneSecond: Cordum's gateway pages its DLQ
// by an inclusive whole-second cursor (cordum-io/cordum
// core/controlplane/gateway/handlers_dlq.go: next_cursor = the last
// entry's created_at in µs - 1, which the next request truncates to
// seconds; core/infra/store/dlq_store.go ListByScore: ZREVRANGEBYSCORE
// max=cursor count=limit, scores in seconds). With more than a page of
// entries dead-lettered in one second (an outage) it answers the same page
// again. The probe took the repeat for the end of the DLQ and answered
// "gone: committed" for a job still in it past that page, so a retry that
// never happened was recorded as done and never made. It must say it
// cannot tell.
func TestCordumProbeCannotPagePastOneSecond(t *testing.T) {
	at := time.Date(2026, 11, 20, 10, 0, 0, 500_000_000, time.UTC)
	const n = 600
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		cur, _ := strconv.ParseInt(r.URL.Query().Get("cursor"), 10, 64)
		var items []string
		for i := range n {
			if len(items) == limit || (cur > 0 && at.Unix() > cur/1_000_000) {
				break
			}
			items = append(items, fmt.Sprintf(`{"job_id":"job_%03d","topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason_code":"pool_overloaded","created_at":%q}`, i, at.Format(time.RFC3339Nano)))
		}
		next := "null"
		if len(items) == limit {
			next = strconv.FormatInt(at.UnixMicro()-1, 10)
		}
		fmt.Fprintf(w, `{"items":[%s],"next_cursor":%s}`, strings.Join(items, ","), next)
	}))
	defer gw.Close()
	tgt, err := NewCordumTarget(gw.URL, 0, Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if got, why := tgt.ProbeEntry(ctx, &entry.Entry{ID: "job_550"}); got != ProbeInconclusive {
		t.Errorf("job past the repeated page: %v (%s), want inconclusive", got, why)
	}
	if got, why := tgt.ProbeEntry(ctx, &entry.Entry{ID: "job_010"}); got != ProbeNotCommitted {
		t.Errorf("job on the first page: %v (%s), want not committed", got, why)
	}
}
