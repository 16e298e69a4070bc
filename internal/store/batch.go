package store

import (
	"context"

	bolt "go.etcd.io/bbolt"
)

// UpdateNow runs fn in a read-write transaction committed at once, outside
// bbolt's Batch: for a caller that has already grouped its writes (a
// replay window) and would otherwise wait out MaxBatchDelay for writers
// that are not coming. fn runs once; its error rolls everything back.
func (s *Bolt) UpdateNow(ctx context.Context, fn func(Tx) error) error {
	if s.ro {
		return ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(btx *bolt.Tx) error { return s.runWrite(btx, fn) })
}
