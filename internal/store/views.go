package store

// The console's views as both backends answer them: the audit filter, the
// gauges, the last-failure order and a sorted page's arguments.

import (
	"fmt"
	"time"
)

// addClass adds n to m[class], creating the map.
func (h *HourCount) AddClass(m *map[string]int64, class string, n int64) {
	if *m == nil {
		*m = map[string]int64{}
	}
	(*m)[class] += n
}

// LastFailure is when an entry last failed (or, when the source does not
// say, was first seen): the order of sort=oldest|newest.
func LastFailure(r *EntryRecord) time.Time {
	if !r.Entry.LastFailure.IsZero() {
		return r.Entry.LastFailure
	}
	return r.FirstSeen
}

// SortedPageArgs checks a SortedPage request as both stores take it: the
// page size (20 by default), the cursor (a last-failure key of 8 bytes and
// the ref after it) and the filter.
func SortedPageArgs(f *EntryFilter, cursor string, limit int) (int, []byte, error) {
	if limit <= 0 {
		limit = 20
	}
	after, err := DecodeCursor(cursor)
	if err != nil {
		return 0, nil, err
	}
	if after != nil && len(after) < 8 {
		return 0, nil, fmt.Errorf("%w: %q", ErrBadCursor, cursor)
	}
	if err := f.Prepare(); err != nil {
		return 0, nil, err
	}
	return limit, after, nil
}

// AuditFilter selects audit records by the indexed fields; empty fields
// select every record. Until is inclusive.
type AuditFilter struct {
	Actor, Kind  string
	Since, Until time.Time
}

// Gauges are the counts a metrics scrape exposes: entries by cell, open
// entries by source and topic, and the oldest open entry. Their size is
// bounded by the label values in use, never by how many entries, days or
// failure signatures the store has seen (Counters carries those too).
type Gauges struct {
	Cells      []Cell
	Open       []Depth
	OldestOpen time.Time // last failure of the oldest open entry (Counters.OldestOpen)
}
