package maintenance

import (
	"context"
	"time"
)

// AuditSealer is a store whose audit records are chained after they
// commit (PostgreSQL; bbolt chains each record as it appends it).
type AuditSealer interface {
	// SealAudit chains the committed records after the sealed head; with
	// wait false it gives way when another process is sealing.
	SealAudit(ctx context.Context, wait bool) (int, error)
}

// finalSealTimeout bounds the last seal at Stop.
const finalSealTimeout = 5 * time.Second

// NewAuditSealer is the duty that seals the audit tail every o.Every
// (one process per round wins the store's lock; the others give way) and
// once more at Stop, waiting for the lock, so what this process wrote
// leaves sealed. Rounds are not logged (20 a second at the store's
// cadence); they are counted in the maintenance metrics.
func NewAuditSealer(s AuditSealer, o Options) (*Periodic, error) {
	o.Final = func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, finalSealTimeout)
		defer cancel()
		_, err := s.SealAudit(ctx, true)
		return err
	}
	return NewPeriodic("audit-sealer", o, func(ctx context.Context) ([]any, error) {
		_, err := s.SealAudit(ctx, false)
		return nil, err
	})
}
