package server

import (
	"github.com/replayctl/replayctl/internal/connector/registry"
	"github.com/replayctl/replayctl/internal/entry"
)

// sourceRef is how the source system itself names an entry, for the
// entry page: its own id and, where the system shows the entry over HTTP,
// a link; for a file, the file. Each connector says how (its SourceRef).
type sourceRef struct {
	System string // the system's name as people write it
	IDName string // what the system calls its id: job_id, item_id, ...
	ID     string
	// Link is a GET the system answers about this entry ("" when none).
	Link, LinkText string
	// Path is the system's own place for the entry that is not a page (a
	// dead-letter path, an item file).
	Path, PathName string
	// Extra is more of the system's ids.
	Extra map[string]string
}

// sourceRefOf names the entry as its source system does.
func sourceRefOf(e *entry.Entry) sourceRef {
	ref := sourceRef{System: e.Source, IDName: "id", ID: e.ID}
	if e.Undecodable() {
		ref.IDName, ref.Path, ref.PathName = "where", e.Origin, "record"
		if e.ID != e.Origin {
			// Named by its own id, its content or its item file (a live
			// source, an item file), not where it was: Path says where.
			ref.IDName = "id (undecodable)"
		}
		return ref
	}
	c, ok := registry.SourceRef(e)
	if !ok {
		ref.Path, ref.PathName = e.Origin, "read from"
		return ref
	}
	ref.System, ref.IDName = c.System, c.IDName
	ref.Link, ref.LinkText = c.Link, c.LinkText
	ref.Path, ref.PathName = c.Path, c.PathName
	ref.Extra = c.Extra
	return ref
}
