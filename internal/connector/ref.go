package connector

import (
	"net/url"
	"strings"
)

// SourceRef is how a system itself names an entry, for the console's
// entry page: its own id and, where the system shows the entry over HTTP,
// a link; for a file, the file.
type SourceRef struct {
	System string // the system's name as people write it
	IDName string // what the system calls its id: job_id, item_id, ...
	// Link is a GET the system answers about this entry ("" when none).
	Link, LinkText string
	// Path is the system's own place for the entry that is not a page (a
	// dead-letter path, an item file).
	Path, PathName string
	// Extra is more of the system's ids.
	Extra map[string]string
}

// LiveBase is the base URL of the live system a record was read from,
// from its origin (the page URL and record number, as a live source
// writes it), when the origin is that system's listing path.
func LiveBase(origin, listing string) (string, bool) {
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
