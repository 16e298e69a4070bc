package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
)

// AuditTamperRefusals is how many appends this store refused because the
// chain head was not signed with its key.
func (s *Bolt) AuditTamperRefusals() uint64 { return s.tamper.N.Load() }

// LedgerStates implements audit.LedgerReader.
func (s *Bolt) LedgerStates(ctx context.Context, fn func(key, state string) error) error {
	return s.LedgerRecords(ctx, func(r *idempotency.Record) error { return fn(r.Key, string(r.State)) })
}

// ChainSucceeded returns the first audit record about the entry ref that
// says key's replay succeeded (0: none), read from the entry's audit index
// in this transaction. The runner asks before dispatching a key the ledger
// says was sent before but not succeeded: an edited ledger must not make
// it send again what the chain records as done.
func (t *boltTx) ChainSucceeded(ref, key string) (uint64, error) {
	idx, ab := t.bucket(bucketIdx), t.bucket(bucketAudit)
	if idx == nil || ab == nil || key == "" {
		return 0, nil
	}
	for _, prefix := range [][]byte{auditIndexKey(&audit.Record{EntryRef: ref}), auditIndexKey(&audit.Record{Key: key})} {
		c := idx.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if len(k) != len(prefix)+8 {
				continue
			}
			seq := binary.BigEndian.Uint64(k[len(prefix):])
			v := ab.Get(seqKey(seq))
			if v == nil {
				continue
			}
			var s audit.Sealed
			if err := store.DecodeValue(v, &s); err != nil {
				return 0, fmt.Errorf("audit record %d: %w", seq, err)
			}
			rec, err := s.Open()
			if err != nil {
				return 0, err
			}
			if rec.Key == key && rec.LedgerAfter == audit.StateSucceeded {
				return seq, nil
			}
		}
	}
	return 0, nil
}
