package cordum

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/pages"
	"github.com/replayctl/replayctl/internal/entry"
)

// Target replays a Cordum DLQ entry the way Cordum's own Retry does:
// POST /api/v1/dlq/{job_id}/retry on the gateway, which rebuilds the job
// from Cordum's job store, publishes it as a new job, deletes the DLQ
// entry and answers 200 {"job_id": NEW}; 404 when the entry is no longer
// in the DLQ (cordum-io/cordum core/controlplane/gateway handlers_dlq.go).
// Auth: X-API-Key and X-Tenant-ID.
type Target struct {
	pages.Endpoint
	apiKey, tenant string
}

// NewTarget returns a target for the gateway at base.
func NewTarget(base string, timeout time.Duration, apiKey, tenant string) (*Target, error) {
	ep, err := pages.NewEndpoint(base, timeout, apiKey)
	if err != nil {
		return nil, fmt.Errorf("cordum target: %w", err)
	}
	// The first of a comma list; an entry's own tenant wins (TenantLabel).
	tenant = Tenants(tenant)[0]
	return &Target{Endpoint: ep, apiKey: apiKey, tenant: tenant}, nil
}

func (t *Target) header() http.Header {
	h := http.Header{}
	if t.apiKey != "" {
		h.Set("X-API-Key", t.apiKey)
	}
	h.Set("X-Tenant-ID", t.tenant)
	return h
}

// Dispatch asks Cordum to retry the job.
func (t *Target) Dispatch(ctx context.Context, r connector.Request) connector.Result {
	out, excerpt := t.Replay(ctx, "/api/v1/dlq/"+url.PathEscape(r.Entry.ID)+"/retry", withTenant(t.header(), r.Entry), r.Key,
		"cordum: job "+r.Entry.ID+" is no longer in the DLQ (retried or deleted elsewhere): ", http.StatusNotFound)
	if out.Outcome == connector.Succeeded {
		out.SourceUpdated = true
		var body struct {
			JobID string `json:"job_id"`
		}
		if json.Unmarshal(excerpt, &body) == nil && body.JobID != "" {
			out.NewJobID = body.JobID
			out.Detail = "cordum: retried as job " + body.JobID
		}
	}
	return out
}

// Probe cannot work from the key alone: Cordum knows jobs by id.
func (t *Target) Probe(context.Context, string) (connector.ProbeResult, string) {
	return connector.ProbeInconclusive, "cordum: probe needs the job id"
}

// ProbeEntry is the compensating read for Cordum: the job still in the
// DLQ (GET /api/v1/dlq/page, following next_cursor and reading on past
// pages the gateway filtered short, walkPages) means the retry did not
// happen; gone means it did, or a person deleted it: either way it must
// not be replayed again. It asks as the entry's own tenant (TenantLabel).
func (t *Target) ProbeEntry(ctx context.Context, e *entry.Entry) (connector.ProbeResult, string) {
	found := false
	get := func(ctx context.Context, u string) ([]byte, error) {
		var raw json.RawMessage
		err := t.GetJSON(ctx, u, withTenant(t.header(), e), &raw)
		return raw, err
	}
	_, err := walkPages(ctx, t.Base, get, pages.MaxProbePages, func(_ string, body []byte) (int, bool) {
		var page struct {
			Items []struct {
				JobID string `json:"job_id"`
			} `json:"items"`
		}
		if json.Unmarshal(body, &page) != nil {
			return 0, false // nextCursor names what is wrong with it
		}
		for _, it := range page.Items {
			if it.JobID == e.ID {
				found = true
				return len(page.Items), true
			}
		}
		return len(page.Items), false
	})
	switch {
	case found:
		return connector.ProbeNotCommitted, "cordum probe: job " + e.ID + " is still in the DLQ: not retried"
	case errors.Is(err, errNoCursor):
		// Not the end of the DLQ: the job may be further on.
		return connector.ProbeInconclusive, "cordum probe: the gateway gave no cursor after a full page (its last entry has no created_at): job " + e.ID + " may still be in the DLQ past it"
	case errors.Is(err, errCursorRepeats):
		// The cursor is an inclusive whole second: over a page of entries
		// dead-lettered in one second, the gateway answers the same page
		// again and never reaches the rest. The job may be among them.
		return connector.ProbeInconclusive, "cordum probe: more than a page of entries were dead-lettered within one second, which the gateway cannot page past: job " + e.ID + " may still be in the DLQ"
	case errors.Is(err, errTooLong):
		return connector.ProbeInconclusive, "cordum probe: DLQ too long to scan"
	case err != nil:
		return connector.ProbeInconclusive, "cordum probe: " + err.Error()
	}
	return connector.ProbeCommitted, "cordum probe: job " + e.ID + " is no longer in the DLQ: retried or deleted"
}
