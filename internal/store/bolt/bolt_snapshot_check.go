package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/replayctl/replayctl/internal/audit"
	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/store"
)

// Whether a snapshot that is not stored was deleted or never kept is told
// by a marker written with the first snapshot this version stores: the
// seq of the next audit record then. Every path that records a decision
// stores its snapshot first, so from that record on a missing snapshot was
// deleted (audit.MissingBlobError); before it (a file written by an older
// version, which did not keep every snapshot) it is no error.
var keySnapshotsKeptFrom = []byte("snapshots_kept_from")

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
			return store.MissingSnapshot(marker)
		}
		data, err := store.RecordJSON(v)
		if err != nil {
			return fmt.Errorf("%w: %v", audit.ErrBlobChanged, err)
		}
		return store.CheckSnapshot(id, data)
	})
}
