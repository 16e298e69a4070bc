package replay

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
)

// headerFor is the header of a request about e: the entry's own tenant
// when the run read several (source.CordumTenantLabel), else the
// configured one. The gateway checks the job's tenant against it
// (finmaster1/cordum handlers_dlq.go requireTenantAccess; "tenant
// access denied").
func (t *CordumTarget) headerFor(e *entry.Entry) http.Header {
	h := t.header()
	if e != nil {
		if tenant := e.Labels[source.CordumTenantLabel]; tenant != "" {
			h.Set("X-Tenant-ID", tenant)
		}
	}
	return h
}

// cordumProbePage is one page of Cordum's DLQ as a probe reads it.
type cordumProbePage struct {
	Items []struct {
		JobID     string          `json:"job_id"`
		CreatedAt json.RawMessage `json:"created_at"`
	} `json:"items"`
	NextCursor json.RawMessage `json:"next_cursor"`
}

// followOn is the cursor after a page that came back short without one:
// the gateway drops other tenants' entries and those with expired job
// metadata from each page, and sends no cursor once the page it kept is
// short (handlers_dlq.go:64-88 at e00450ed), so a short page is not the
// end of the DLQ. Taking it for the end made a probe answer "gone:
// committed" for a job still in the DLQ further on. It goes on from the
// page's oldest entry; false when the page brought no job not seen
// before (then it is the end, as far as the gateway lets anyone see).
func (p *cordumProbePage) followOn(seen map[string]bool) (string, bool) {
	fresh := false
	for _, it := range p.Items {
		if !seen[it.JobID] {
			seen[it.JobID], fresh = true, true
		}
	}
	if !fresh {
		return "", false
	}
	var raw string
	if json.Unmarshal(p.Items[len(p.Items)-1].CreatedAt, &raw) != nil {
		return "", false
	}
	at, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil || at.IsZero() {
		return "", false
	}
	return strconv.FormatInt(at.UnixMicro()-1, 10), true
}
