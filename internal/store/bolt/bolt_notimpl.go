package bolt

import (
	"context"
	"time"

	"github.com/replayctl/replayctl/internal/store"
)

// What each backend answers of the contract (Backend) for what it lacks:
// ErrNotImplemented, or the answer that is true of it (bbolt has no
// claims to release; PostgreSQL tracks no dispatch in a process, its
// leases decide). Callers key on Features and never reach these.

// Ingest implements Shared: bbolt shares no work.
func (s *Bolt) Ingest(context.Context, []*store.EntryRecord) (int, error) {
	return 0, store.ErrNotImplemented
}

// Claim implements Shared: bbolt shares no work.
func (s *Bolt) Claim(context.Context, string, time.Time, int, time.Duration) ([]store.Claim, error) {
	return nil, store.ErrNotImplemented
}

// ClaimRef implements Shared: bbolt shares no work.
func (s *Bolt) ClaimRef(context.Context, string, string, time.Duration) (store.Claim, bool, error) {
	return store.Claim{}, false, store.ErrNotImplemented
}

// Release implements Shared: bbolt shares no work.
func (s *Bolt) Release(context.Context, string, int64) error { return store.ErrNotImplemented }

// Now implements Shared: bbolt has no clock of its own.
func (s *Bolt) Now(context.Context) (time.Time, error) { return time.Time{}, store.ErrNotImplemented }

// LeadIngest implements Shared: bbolt shares no work.
func (s *Bolt) LeadIngest(context.Context, time.Time) (func(bool), bool, error) {
	return nil, false, store.ErrNotImplemented
}

// Ingesting implements Shared: bbolt shares no work.
func (s *Bolt) Ingesting(context.Context) (bool, error) { return false, store.ErrNotImplemented }

// HeldElsewhere implements Shared: bbolt shares no work.
func (s *Bolt) HeldElsewhere(context.Context, string, time.Time) (int, time.Time, error) {
	return 0, time.Time{}, store.ErrNotImplemented
}

// RenewLease implements Shared: bbolt has no leases.
func (s *Bolt) RenewLease(context.Context, string, int64, time.Duration) (bool, error) {
	return false, store.ErrNotImplemented
}

// ReleaseLater implements Shared: bbolt has no claim to release.
func (s *Bolt) ReleaseLater(string, int64) {}

// FlushReleases implements Shared: bbolt shares no work.
func (s *Bolt) FlushReleases(context.Context) error { return store.ErrNotImplemented }

// UnderFence implements Tx: bbolt has no claims.
func (t *boltTx) UnderFence(store.Fence, func(store.Tx) error) error { return store.ErrNotImplemented }

// CheckFences implements Tx: bbolt has no claims.
func (t *boltTx) CheckFences([]store.Fence) ([]error, error) { return nil, store.ErrNotImplemented }
