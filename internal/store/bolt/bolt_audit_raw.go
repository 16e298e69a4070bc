package bolt

import (
	"context"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// AuditRangeRaw calls fn with every stored audit record from seq `from`
// on, in order: its key's seq (0 for a malformed key) and its stored bytes
// (DecodeValue reads them, into an audit.Sealed or any shape of it). The
// bytes are valid only during fn. For a reader that decodes on other
// goroutines (policy backtest): AuditRange decodes on the reading one.
func (s *Bolt) AuditRangeRaw(ctx context.Context, from uint64, fn func(seq uint64, raw []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(seqKey(from)); k != nil; k, v = c.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			seq := uint64(0)
			if len(k) == 8 {
				seq = binary.BigEndian.Uint64(k)
			}
			if err := fn(seq, v); err != nil {
				return err
			}
		}
		return nil
	})
}
