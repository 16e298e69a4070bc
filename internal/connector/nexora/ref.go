package nexora

import (
	"strings"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
)

// SourceRef names an entry as Nexora does. Its observability server lists
// dead letters at GET /api/dead-letters?state=&page=&size= and has no GET
// for one (its /api/dead-letters/{id} answers only POST replay and
// resolve): the link is the page the entry was read from.
func SourceRef(e *entry.Entry) connector.SourceRef {
	ref := connector.SourceRef{System: "Nexora", IDName: "dead-letter id"}
	if base, ok := connector.LiveBase(e.Origin, "/api/dead-letters"); ok {
		page := strings.TrimPrefix(e.Origin, base)
		if i := strings.LastIndexByte(page, ':'); i > 0 {
			page = page[:i] // the record number the source appended
		}
		ref.Link, ref.LinkText = base+page, "the dead-letter page it was read from"
	}
	if x := e.Labels["execution_id"]; x != "" {
		ref.Extra = map[string]string{"execution id": x}
	}
	return ref
}
