package store

import (
	"bytes"
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	bolt "go.etcd.io/bbolt"
)

// Runs (bulk replays, reconciles) are kept as the JSON their owner, the
// runs package, writes, by id: the store never interprets them. They live
// beside the state they describe so that `runs list|show|cancel` work from
// another process (PostgreSQL, or the serving process of a bbolt file).

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
		return ErrReadOnly
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
			return ErrNotFound
		}
		v := b.Get([]byte(id))
		if v == nil {
			return ErrNotFound
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
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

// ErrStop ends a Runs walk early without an error.
var ErrStop = errors.New("stop")

// runsTable is created on first use: the numbered migrations in
// postgres.go belong to the schema's owner; this table is additive and
// independent (the lead may fold it into the next migration).
const runsTable = `CREATE TABLE IF NOT EXISTS runs (id text PRIMARY KEY, rec bytea NOT NULL)`

// ensureRuns creates the table if needed; cheap when it exists, and run
// writes are throttled by their owner.
func (p *Postgres) ensureRuns(ctx context.Context) error {
	var exists bool
	if err := p.pool.QueryRow(ctx, `SELECT to_regclass('runs') IS NOT NULL`).Scan(&exists); err != nil || exists {
		return err
	}
	// CREATE TABLE IF NOT EXISTS is not atomic: of two workers creating the
	// table at once, the loser failed (a unique violation on pg_type, or
	// "type runs already exists") and so did its reconcile. Creators take
	// the migrations' lock, so the second finds the table made.
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(lockMigrate)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, runsTable)
		return err
	})
}

// PutRun writes a run record.
func (p *Postgres) PutRun(ctx context.Context, id string, rec []byte) error {
	return p.UpdateRun(ctx, id, func([]byte) ([]byte, error) { return rec, nil })
}

// UpdateRun replaces a run record with fn(current), the row locked.
func (p *Postgres) UpdateRun(ctx context.Context, id string, fn func([]byte) ([]byte, error)) error {
	if err := p.ensureRuns(ctx); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		var cur []byte
		err := tx.QueryRow(ctx, `SELECT rec FROM runs WHERE id = $1 FOR UPDATE`, id).Scan(&cur)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		next, err := fn(cur)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO runs (id, rec) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET rec = EXCLUDED.rec`, id, next)
		return err
	})
}

// Run reads one run record.
func (p *Postgres) Run(ctx context.Context, id string) ([]byte, error) {
	if err := p.ensureRuns(ctx); err != nil {
		return nil, err
	}
	var out []byte
	err := p.pool.QueryRow(ctx, `SELECT rec FROM runs WHERE id = $1`, id).Scan(&out)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	return out, err
}

// Runs calls fn for run records, newest first.
func (p *Postgres) Runs(ctx context.Context, fn func(id string, rec []byte) error) error {
	if err := p.ensureRuns(ctx); err != nil {
		return err
	}
	rows, err := p.pool.Query(ctx, `SELECT id, rec FROM runs ORDER BY id DESC`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var rec []byte
		if err := rows.Scan(&id, &rec); err != nil {
			return err
		}
		if err := fn(id, rec); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	return rows.Err()
}
