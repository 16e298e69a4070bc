package postgres

import (
	"context"
)

// TamperPGAuditForTest is TamperAuditForTest on PostgreSQL: the sealed
// record's body is rewritten in place, its hash left as it was.
func TamperPGAuditForTest(ctx context.Context, p *Postgres, seq uint64) error {
	_, err := p.pool.Exec(ctx, `UPDATE audit SET body = convert_to('{"seq":' || seq || ',"kind":"decision","actor":"mallory"}', 'UTF8') WHERE seq = $1`, int64(seq))
	return err
}
