package bolt

import (
	"context"
	"encoding/json"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// What bbolt answers of the contract (Backend) that only PostgreSQL's
// chain needed before: a bbolt writer chains and signs each record as it
// appends it, so there is never an unsealed tail.

// AuditSignedHead implements audit.SignedHeadReader: the head and its
// signature, read in one transaction.
func (s *Bolt) AuditSignedHead(ctx context.Context) (seq uint64, hash, mac string, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		hash = audit.Genesis
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return nil
		}
		head := auditHead{Hash: audit.Genesis}
		if v := meta.Get(keyAuditHead); v != nil {
			if err := json.Unmarshal(v, &head); err != nil {
				return err
			}
		}
		seq, hash, mac = head.Seq, head.Hash, string(meta.Get(keyAuditMAC))
		return nil
	})
	return seq, hash, mac, err
}

// AuditUnsealed implements audit.TailReader: every record bbolt stores is
// chained when it is appended.
func (s *Bolt) AuditUnsealed(context.Context) (int, error) { return 0, nil }

// AuditTailForged implements audit.TailChecker: there is no record after
// the head to check (the head's own signature is checked by the verifier).
func (s *Bolt) AuditTailForged(context.Context, []byte) (uint64, error) { return 0, nil }

// Features implements Backend: one process holds a bbolt file.
func (s *Bolt) Features() store.Features { return store.Features{} }

// TryRunLock implements Backend: the file lock bbolt takes on open already
// keeps every other process out, so the scheduler lock is always this
// process's.
func (s *Bolt) TryRunLock(context.Context) (release func(), ok bool, err error) {
	return func() {}, true, nil
}

var (
	_ store.Backend     = (*Bolt)(nil)
	_ store.Grouped     = (*Bolt)(nil)
	_ store.Indexed     = (*Bolt)(nil)
	_ audit.BlobChecker = (*Bolt)(nil)
)
