package bolt

import (
	"bytes"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/store"
)

// The age of an open entry is the time since its last failure (issue 30):
// the console's list and filters, `dlq list --older-than` and the bulk
// filters count from it, so the overview's "oldest open", the
// replayctl_oldest_open_entry_age_seconds gauge and the
// ReplayctlOldestEntryTooOld alert count from it too. An entry first seen
// weeks ago that failed again a minute ago is a minute old.
//
// It is read from the console's view index, 'L' lp(state) order(last
// failure) ikey (bolt_views.go), which the entry's own transaction keeps:
// the first key of each open state's range past the zero order (an entry
// with no time at all has no age), one seek per open state, whatever the
// store's size.

// oldestOpenFailure is the last failure (LastFailure) of the open entry
// that failed longest ago; zero when no open entry has a time.
func oldestOpenFailure(idx *bolt.Bucket) time.Time {
	var oldest time.Time
	c := idx.Cursor()
	for _, st := range store.OpenStates() {
		p := store.DimPrefix(dimLastFailure, st)
		// Past every key whose order is eight zero bytes (a zero time).
		from := append(append(make([]byte, 0, len(p)+8), p...), 0, 0, 0, 0, 0, 0, 0, 1)
		k, _ := c.Seek(from)
		if len(k) < len(p)+8 || !bytes.HasPrefix(k, p) {
			continue
		}
		if t := timeFromKey(k[len(p) : len(p)+8]); oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	return oldest
}
