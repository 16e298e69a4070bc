package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/triage"
)

// A policy snapshot is stored once under its id, the sha256 of its rules
// and policy text, and audit records refer to it by that id (in the hash
// chain). `audit verify` checks the stored text still hashes to the id:
// a snapshot changed in the store would make `audit replay-decision`
// re-run a past decision on other rules than it ran with.
var (
	_ audit.BlobChecker = (*Bolt)(nil)
	_ audit.BlobChecker = (*Postgres)(nil)
)

// Whether a snapshot that is not stored was deleted or never kept is told
// by a marker written with the first snapshot this version stores: the
// seq of the next audit record then. Every path that records a decision
// stores its snapshot first, so from that record on a missing snapshot was
// deleted (audit.MissingBlobError); before it (a file written by an older
// version, which did not keep every snapshot) it is no error.
var keySnapshotsKeptFrom = []byte("snapshots_kept_from")

// pgSnapshotsKeptFrom is the marker on PostgreSQL: a row of the snapshots
// table under an id no snapshot has (theirs are "sha256:...").
const pgSnapshotsKeptFrom = "replayctl:snapshots-kept-from"

// markSnapshotsKept writes the marker once, in PutSnapshot's transaction.
func markSnapshotsKept(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta.Get(keySnapshotsKeptFrom) != nil {
		return nil
	}
	var head auditHead
	if v := meta.Get(keyAuditHead); v != nil {
		if err := json.Unmarshal(v, &head); err != nil {
			return fmt.Errorf("decode audit head: %w", err)
		}
	}
	return meta.Put(keySnapshotsKeptFrom, []byte(strconv.FormatUint(head.Seq+1, 10)))
}

// markSnapshotsKept writes the marker once (PostgreSQL's PutSnapshot). A
// record written but not sealed yet gets a seq above the highest sealed.
func (p *Postgres) markSnapshotsKept(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO snapshots (id, body)
		SELECT $1, convert_to((coalesce(max(seq), 0) + 1)::text, 'UTF8') FROM audit
		ON CONFLICT (id) DO NOTHING`, pgSnapshotsKeptFrom)
	return err
}

// missingSnapshot is CheckSnapshot's answer for a snapshot not stored,
// given the marker's value (nil: none).
func missingSnapshot(marker []byte) error {
	if marker == nil {
		// A deleted marker must not hide a deleted snapshot: the
		// verifier still holds records flagged SnapshotKept to theirs.
		return &audit.MissingBlobError{From: audit.NeverKept}
	}
	from, err := strconv.ParseUint(string(marker), 10, 64)
	if err != nil {
		return fmt.Errorf("snapshots kept-from marker %q: %w", marker, err)
	}
	return &audit.MissingBlobError{From: from}
}

// CheckSnapshot implements audit.BlobChecker.
func (s *Bolt) CheckSnapshot(ctx context.Context, id string) error {
	return s.db.View(func(tx *bolt.Tx) error {
		var v []byte
		if b := tx.Bucket(bucketSnapshots); b != nil {
			v = b.Get([]byte(id))
		}
		if v == nil {
			var marker []byte
			if meta := tx.Bucket(bucketMeta); meta != nil {
				marker = meta.Get(keySnapshotsKeptFrom)
			}
			return missingSnapshot(marker)
		}
		data, err := recordJSON(v)
		if err != nil {
			return fmt.Errorf("%w: %v", audit.ErrBlobChanged, err)
		}
		return checkSnapshot(id, data)
	})
}

// CheckSnapshot implements audit.BlobChecker.
func (p *Postgres) CheckSnapshot(ctx context.Context, id string) error {
	var raw json.RawMessage
	err := p.Snapshot(ctx, id, &raw)
	if errors.Is(err, ErrNotFound) {
		var marker []byte
		err := p.pool.QueryRow(ctx, `SELECT body FROM snapshots WHERE id = $1`, pgSnapshotsKeptFrom).Scan(&marker)
		if errors.Is(err, pgx.ErrNoRows) {
			return missingSnapshot(nil)
		}
		if err != nil {
			return err
		}
		return missingSnapshot(marker)
	}
	if err != nil {
		return err
	}
	return checkSnapshot(id, raw)
}

func checkSnapshot(id string, data []byte) error {
	var snap triage.Snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("%w: %v", audit.ErrBlobChanged, err)
	}
	if got := triage.NewSnapshot(snap.Rules, snap.Policies).ID; got != id || snap.ID != id {
		return fmt.Errorf("%w: its rules and policy text hash to %s", audit.ErrBlobChanged, got)
	}
	return nil
}
