package postgres

import (
	"context"

	"github.com/replayctl/replayctl/internal/idempotency"
)

// AuditTamperRefusals is how many seals this process refused because the
// head or an unsealed record was not signed with its key.
func (p *Postgres) AuditTamperRefusals() uint64 { return p.tamper.N.Load() }

// LedgerStates implements audit.LedgerReader.
func (p *Postgres) LedgerStates(ctx context.Context, fn func(key, state string) error) error {
	return p.LedgerRecords(ctx, func(r *idempotency.Record) error { return fn(r.Key, string(r.State)) })
}
