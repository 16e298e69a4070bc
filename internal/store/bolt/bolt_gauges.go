package bolt

import (
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/store"
)

// Gauges reads the scrape's counts in one read transaction: the cell and
// open-depth counters and the oldest open entry's last failure
// (bolt_lastfail.go; ErrNotIndexed on an old file opened read-only).
func (s *Bolt) Gauges(ctx context.Context) (*store.Gauges, error) {
	out := &store.Gauges{}
	err := s.db.View(func(tx *bolt.Tx) error {
		if !indexed(tx) {
			return store.ErrNotIndexed
		}
		cnt := tx.Bucket(bucketCounters)
		out.Cells = readCells(cnt)
		out.Open = readOpen(cnt)
		out.OldestOpen = oldestOpenFailure(tx.Bucket(bucketIdx)) // bolt_lastfail.go
		return ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readOpen reads the open-depth counters ('o' lp(source) lp(topic)).
func readOpen(cnt *bolt.Bucket) []store.Depth {
	var out []store.Depth
	c := cnt.Cursor()
	for k, v := c.Seek([]byte{'o'}); k != nil && k[0] == 'o'; k, v = c.Next() {
		src, rest, ok1 := readLP(k[1:])
		topic, _, ok2 := readLP(rest)
		if ok1 && ok2 {
			out = append(out, store.Depth{Source: src, Topic: topic, N: readCount(v)})
		}
	}
	return out
}
