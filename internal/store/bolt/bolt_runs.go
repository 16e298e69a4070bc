package bolt

import (
	"bytes"
	"context"
	"errors"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/store"
)

var bucketRuns = []byte("runs")

// PutRun writes a run record.
func (s *Bolt) PutRun(ctx context.Context, id string, rec []byte) error {
	return s.UpdateRun(ctx, id, func([]byte) ([]byte, error) { return rec, nil })
}

// UpdateRun replaces a run record with fn(current) in one transaction
// (current is nil when there is none), so a cancel request and a progress
// write never overwrite each other.
func (s *Bolt) UpdateRun(ctx context.Context, id string, fn func([]byte) ([]byte, error)) error {
	if s.ro {
		return store.ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketRuns)
		if err != nil {
			return err
		}
		var cur []byte
		if v := b.Get([]byte(id)); v != nil {
			cur = bytes.Clone(v)
		}
		next, err := fn(cur)
		if err != nil {
			return err
		}
		return b.Put([]byte(id), next)
	})
}

// Run reads one run record (ErrNotFound when there is none).
func (s *Bolt) Run(ctx context.Context, id string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		if b == nil {
			return store.ErrNotFound
		}
		v := b.Get([]byte(id))
		if v == nil {
			return store.ErrNotFound
		}
		out = bytes.Clone(v)
		return nil
	})
	return out, err
}

// Runs calls fn for run records, highest id (newest) first, until fn
// returns ErrStop or an error.
func (s *Bolt) Runs(ctx context.Context, fn func(id string, rec []byte) error) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(string(k), bytes.Clone(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, store.ErrStop) {
		return nil
	}
	return err
}
