package cordum

import (
	"net/url"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
)

// SourceRef names an entry as Cordum does. A Cordum DLQ entry is its job:
// job_id. The gateway lists the DLQ at GET /api/v1/dlq/page and acts on
// one entry at /api/v1/dlq/{job_id} (DELETE, POST .../retry) but has no
// GET for it; the job itself is GET /api/v1/jobs/{id}.
func SourceRef(e *entry.Entry) connector.SourceRef {
	ref := connector.SourceRef{System: "Cordum", IDName: "job_id"}
	if base, ok := connector.LiveBase(e.Origin, "/api/v1/dlq/page"); ok {
		ref.Link, ref.LinkText = base+"/api/v1/jobs/"+url.PathEscape(e.ID), "the job on the gateway"
		ref.Path, ref.PathName = base+"/api/v1/dlq/"+url.PathEscape(e.ID), "dead-letter entry (retry: POST …/retry)"
	} else if e.Source == KindRedis {
		ref.Path, ref.PathName = e.Origin, "Redis key"
	}
	return ref
}
