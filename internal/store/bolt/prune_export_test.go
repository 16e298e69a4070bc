package bolt

import (
	"github.com/replayctl/replayctl/internal/store"
	bolt "go.etcd.io/bbolt"
)

// TamperAuditForTest changes record seq's stored bytes (a body edited in
// place, its hash left as it was), as someone with write access might.
func TamperAuditForTest(s *Bolt, seq uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		v := b.Get(seqKey(seq))
		var raw map[string]any
		if err := store.DecodeValue(v, &raw); err != nil {
			return err
		}
		raw["body"] = map[string]any{"seq": seq, "kind": "decision", "actor": "mallory"}
		data, err := store.EncodeValue(raw)
		if err != nil {
			return err
		}
		return b.Put(seqKey(seq), data)
	})
}
