package nexora

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/pages"
	"github.com/replayctl/replayctl/internal/entry"
)

// Target replays a Nexora dead letter through the observability
// server: POST /api/dead-letters/{id}/replay resubmits Intent(goal,
// context) and marks the record REPLAYED; 202 {"accepted": true,
// "deadLetterId"}; 409 when the record is not PENDING; 404 when unknown
// (iamvirul/nexora nexora-cli ObserveCommand.java, DeadLetterRecord.java).
// NEXORA_TOKEN, when set, is sent as a bearer token.
type Target struct {
	pages.Endpoint
	token string
}

// NewTarget returns a target for the server at base.
func NewTarget(base string, timeout time.Duration, token string) (*Target, error) {
	ep, err := pages.NewEndpoint(base, timeout, token)
	if err != nil {
		return nil, fmt.Errorf("nexora target: %w", err)
	}
	return &Target{Endpoint: ep, token: token}, nil
}

func (t *Target) header() http.Header {
	h := http.Header{}
	if t.token != "" {
		h.Set("Authorization", "Bearer "+t.token)
	}
	return h
}

// Dispatch asks Nexora to replay the dead letter.
func (t *Target) Dispatch(ctx context.Context, r connector.Request) connector.Result {
	out, _ := t.Replay(ctx, "/api/dead-letters/"+url.PathEscape(r.Entry.ID)+"/replay", t.header(), r.Key,
		"nexora: dead letter "+r.Entry.ID+" is no longer PENDING (replayed, resolved or removed elsewhere): ",
		http.StatusConflict, http.StatusNotFound)
	out.SourceUpdated = out.Outcome == connector.Succeeded
	return out
}

// Probe cannot work from the key alone: Nexora knows dead letters by id.
func (t *Target) Probe(context.Context, string) (connector.ProbeResult, string) {
	return connector.ProbeInconclusive, "nexora: probe needs the dead-letter id"
}

// ProbeEntry is the compensating read for Nexora: the dead letter's
// reviewState (GET /api/dead-letters?state=ALL, page by page) PENDING means
// not replayed; REPLAYED, RESOLVED or gone means it must not be replayed.
func (t *Target) ProbeEntry(ctx context.Context, e *entry.Entry) (connector.ProbeResult, string) {
	for p := range pages.MaxProbePages {
		q := url.Values{"state": {"ALL"}, "page": {fmt.Sprint(p)}, "size": {"100"}}
		var page struct {
			Items []struct {
				ID          string `json:"id"`
				ReviewState string `json:"reviewState"`
			} `json:"items"`
		}
		if err := t.GetJSON(ctx, t.Base+"/api/dead-letters?"+q.Encode(), t.header(), &page); err != nil {
			return connector.ProbeInconclusive, "nexora probe: " + err.Error()
		}
		for _, it := range page.Items {
			if it.ID != e.ID {
				continue
			}
			if strings.EqualFold(it.ReviewState, "PENDING") {
				return connector.ProbeNotCommitted, "nexora probe: " + e.ID + " is still PENDING: not replayed"
			}
			return connector.ProbeCommitted, "nexora probe: " + e.ID + " is " + it.ReviewState
		}
		if len(page.Items) < 100 {
			return connector.ProbeCommitted, "nexora probe: " + e.ID + " is no longer listed"
		}
	}
	return connector.ProbeInconclusive, "nexora probe: too many dead letters to scan"
}
