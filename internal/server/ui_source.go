package server

import (
	"net/url"
	"strings"

	"github.com/replayctl/replayctl/internal/entry"
)

// sourceRef is how the source system itself names an entry, for the
// entry page: its own id and, where the system shows the entry over HTTP,
// a link; for a file, the file.
type sourceRef struct {
	System string // "Cordum", "Nexora", "Prodigy", ...
	IDName string // what the system calls its id: job_id, item_id, ...
	ID     string
	// Link is a GET the system answers about this entry ("" when none).
	Link, LinkText string
	// Path is the system's own place for the entry that is not a page:
	// Cordum's dead-letter path (its retry and delete), Prodigy's DLQ item
	// file.
	Path, PathName string
	// Extra is more of the system's ids (Nexora's execution id).
	Extra map[string]string
}

// liveBase is the base URL of the live gateway a record was read from,
// from its origin (the page URL and record number, as the live source
// writes it), when the origin is that system's listing path.
func liveBase(origin, listing string) (string, bool) {
	if !strings.HasPrefix(origin, "http://") && !strings.HasPrefix(origin, "https://") {
		return "", false
	}
	i := strings.Index(origin, listing)
	if i < 0 {
		return "", false
	}
	u, err := url.Parse(origin[:i])
	if err != nil || u.Host == "" {
		return "", false
	}
	return origin[:i], true
}

// sourceRefOf names the entry as its source system does.
func sourceRefOf(e *entry.Entry) sourceRef {
	ref := sourceRef{System: e.Source, IDName: "id", ID: e.ID}
	if e.Undecodable() {
		ref.IDName, ref.Path, ref.PathName = "where", e.Origin, "record"
		if e.ID != e.Origin {
			// Named by its own id, its content or its item file (a live
			// source, a Prodigy item), not where it was: Path says where.
			ref.IDName = "id (undecodable)"
		}
		return ref
	}
	switch e.Source {
	case entry.KindCordum, entry.KindCordumRedis:
		// A Cordum DLQ entry is its job: job_id. The gateway lists the DLQ
		// at GET /api/v1/dlq/page and acts on one entry at
		// /api/v1/dlq/{job_id} (DELETE, POST .../retry) but has no GET for
		// it; the job itself is GET /api/v1/jobs/{id}.
		ref.System, ref.IDName = "Cordum", "job_id"
		if base, ok := liveBase(e.Origin, "/api/v1/dlq/page"); ok {
			ref.Link, ref.LinkText = base+"/api/v1/jobs/"+url.PathEscape(e.ID), "the job on the gateway"
			ref.Path, ref.PathName = base+"/api/v1/dlq/"+url.PathEscape(e.ID), "dead-letter entry (retry: POST …/retry)"
		} else if e.Source == entry.KindCordumRedis {
			ref.Path, ref.PathName = e.Origin, "Redis key"
		}
	case entry.KindNexora:
		// Nexora's observability server lists dead letters at GET
		// /api/dead-letters?state=&page=&size= and has no GET for one (its
		// /api/dead-letters/{id} answers only POST replay and resolve): the
		// link is the page the entry was read from.
		ref.System, ref.IDName = "Nexora", "dead-letter id"
		if base, ok := liveBase(e.Origin, "/api/dead-letters"); ok {
			page := strings.TrimPrefix(e.Origin, base)
			if i := strings.LastIndexByte(page, ':'); i > 0 {
				page = page[:i] // the record number the source appended
			}
			ref.Link, ref.LinkText = base+page, "the dead-letter page it was read from"
		}
		if x := e.Labels["execution_id"]; x != "" {
			ref.Extra = map[string]string{"execution id": x}
		}
	case entry.KindProdigy:
		// One file per item under the job's DLQ directory.
		ref.System, ref.IDName = "Prodigy", "item_id"
		ref.Path, ref.PathName = e.Origin, "DLQ item file"
		if e.Scope != "" {
			ref.Extra = map[string]string{"job": e.Scope}
		}
	default:
		ref.System = e.Source
		ref.Path, ref.PathName = e.Origin, "read from"
	}
	return ref
}
