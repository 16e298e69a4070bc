package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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

// CheckSnapshot implements audit.BlobChecker.
func (s *Bolt) CheckSnapshot(ctx context.Context, id string) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSnapshots)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(id))
		if v == nil {
			return nil
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
		return nil
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
