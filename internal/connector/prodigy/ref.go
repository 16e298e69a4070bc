package prodigy

import (
	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
)

// SourceRef names an entry as Prodigy does: one file per item under the
// job's DLQ directory.
func SourceRef(e *entry.Entry) connector.SourceRef {
	ref := connector.SourceRef{System: "Prodigy", IDName: "item_id", Path: e.Origin, PathName: "DLQ item file"}
	if e.Scope != "" {
		ref.Extra = map[string]string{"job": e.Scope}
	}
	return ref
}
