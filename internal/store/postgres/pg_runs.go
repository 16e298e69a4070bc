package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/replayctl/replayctl/internal/store"
)

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
		return nil, store.ErrNotFound
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
			if errors.Is(err, store.ErrStop) {
				return nil
			}
			return err
		}
	}
	return rows.Err()
}
