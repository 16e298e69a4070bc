package store

import (
	"context"

	bolt "go.etcd.io/bbolt"
)

// TamperAuditForTest changes record seq's stored bytes (a body edited in
// place, its hash left as it was), as someone with write access might.
func TamperAuditForTest(s *Bolt, seq uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		v := b.Get(seqKey(seq))
		var raw map[string]any
		if err := DecodeValue(v, &raw); err != nil {
			return err
		}
		raw["body"] = map[string]any{"seq": seq, "kind": "decision", "actor": "mallory"}
		data, err := EncodeValue(raw)
		if err != nil {
			return err
		}
		return b.Put(seqKey(seq), data)
	})
}

// TamperPGAuditForTest is TamperAuditForTest on PostgreSQL: the sealed
// record's body is rewritten in place, its hash left as it was.
func TamperPGAuditForTest(ctx context.Context, p *Postgres, seq uint64) error {
	_, err := p.pool.Exec(ctx, `UPDATE audit SET body = convert_to('{"seq":' || seq || ',"kind":"decision","actor":"mallory"}', 'UTF8') WHERE seq = $1`, int64(seq))
	return err
}
