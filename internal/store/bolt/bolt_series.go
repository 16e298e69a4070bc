package bolt

import (
	"bytes"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/store"
)

// Per-class hourly series, kept in the counters bucket beside the hourly
// totals ('h' + hour + kind):
//
//	'I' + class: entries first seen in the hour, by their current class. It
//	             is a facet of the entry (entryFacets), so a reclassified
//	             entry moves with it and a rebuild recounts it exactly.
//	'R' + class: entries that left the open states in the hour, by the
//	             class they had then. An event: a rebuild cannot recount it,
//	             so ensureIndex carries it (and the 'r' total) over.

// classInflowKeys is the entry's per-class inflow counter (none without a
// first-seen time: the hour total then counts it at the write's time).
func classInflowKeys(r *store.EntryRecord) []string {
	if r.FirstSeen.IsZero() {
		return nil
	}
	return []string{string(hourKey(r.FirstSeen, "I"+string(r.Class)))}
}

// drainedClassKey is the per-class drained counter of the hour of now.
func drainedClassKey(now time.Time, r *store.EntryRecord) []byte {
	return hourKey(now, "R"+string(r.Class))
}

// keptSeries returns the hourly event counters ('r', 'R'+class) a rebuild
// must carry over.
func keptSeries(tx *bolt.Tx) map[string][]byte {
	cnt := tx.Bucket(bucketCounters)
	if cnt == nil {
		return nil
	}
	out := map[string][]byte{}
	c := cnt.Cursor()
	for k, v := c.Seek([]byte{'h'}); k != nil && k[0] == 'h'; k, v = c.Next() {
		if len(k) > 9 && (k[9] == 'r' || k[9] == 'R') {
			out[string(bytes.Clone(k))] = bytes.Clone(v)
		}
	}
	return out
}
