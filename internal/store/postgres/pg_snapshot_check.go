package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/replayctl/replayctl/internal/store"
)

// pgSnapshotsKeptFrom is the marker on PostgreSQL: a row of the snapshots
// table under an id no snapshot has (theirs are "sha256:...").
const pgSnapshotsKeptFrom = "replayctl:snapshots-kept-from"

// markSnapshotsKept writes the marker once (PostgreSQL's PutSnapshot). A
// record written but not sealed yet gets a seq above the highest sealed.
func (p *Postgres) markSnapshotsKept(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO snapshots (id, body)
		SELECT $1, convert_to((coalesce(max(seq), 0) + 1)::text, 'UTF8') FROM audit
		ON CONFLICT (id) DO NOTHING`, pgSnapshotsKeptFrom)
	return err
}

// CheckSnapshot implements audit.BlobChecker.
func (p *Postgres) CheckSnapshot(ctx context.Context, id string) error {
	var raw json.RawMessage
	err := p.Snapshot(ctx, id, &raw)
	if errors.Is(err, store.ErrNotFound) {
		var marker []byte
		err := p.pool.QueryRow(ctx, `SELECT body FROM snapshots WHERE id = $1`, pgSnapshotsKeptFrom).Scan(&marker)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.MissingSnapshot(nil)
		}
		if err != nil {
			return err
		}
		return store.MissingSnapshot(marker)
	}
	if err != nil {
		return err
	}
	return store.CheckSnapshot(id, raw)
}
