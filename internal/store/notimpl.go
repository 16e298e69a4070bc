package store

import (
	"context"
	"time"
)

// What each backend answers of the contract (Backend) for what it lacks:
// ErrNotImplemented, or the answer that is true of it (bbolt has no
// claims to release; PostgreSQL tracks no dispatch in a process, its
// leases decide). Callers key on Features and never reach these.

// Ingest implements Shared: bbolt shares no work.
func (s *Bolt) Ingest(context.Context, []*EntryRecord) (int, error) { return 0, ErrNotImplemented }

// Claim implements Shared: bbolt shares no work.
func (s *Bolt) Claim(context.Context, string, time.Time, int, time.Duration) ([]Claim, error) {
	return nil, ErrNotImplemented
}

// ClaimRef implements Shared: bbolt shares no work.
func (s *Bolt) ClaimRef(context.Context, string, string, time.Duration) (Claim, bool, error) {
	return Claim{}, false, ErrNotImplemented
}

// Release implements Shared: bbolt shares no work.
func (s *Bolt) Release(context.Context, string, int64) error { return ErrNotImplemented }

// Now implements Shared: bbolt has no clock of its own.
func (s *Bolt) Now(context.Context) (time.Time, error) { return time.Time{}, ErrNotImplemented }

// LeadIngest implements Shared: bbolt shares no work.
func (s *Bolt) LeadIngest(context.Context, time.Time) (func(bool), bool, error) {
	return nil, false, ErrNotImplemented
}

// Ingesting implements Shared: bbolt shares no work.
func (s *Bolt) Ingesting(context.Context) (bool, error) { return false, ErrNotImplemented }

// HeldElsewhere implements Shared: bbolt shares no work.
func (s *Bolt) HeldElsewhere(context.Context, string, time.Time) (int, time.Time, error) {
	return 0, time.Time{}, ErrNotImplemented
}

// RenewLease implements Shared: bbolt has no leases.
func (s *Bolt) RenewLease(context.Context, string, int64, time.Duration) (bool, error) {
	return false, ErrNotImplemented
}

// ReleaseLater implements Shared: bbolt has no claim to release.
func (s *Bolt) ReleaseLater(string, int64) {}

// FlushReleases implements Shared: bbolt shares no work.
func (s *Bolt) FlushReleases(context.Context) error { return ErrNotImplemented }

// UnderFence implements Tx: bbolt has no claims.
func (t *boltTx) UnderFence(Fence, func(Tx) error) error { return ErrNotImplemented }

// CheckFences implements Tx: bbolt has no claims.
func (t *boltTx) CheckFences([]Fence) ([]error, error) { return nil, ErrNotImplemented }

// BeginDispatch implements Backend: on a shared store the lease, not the
// process, says whether a dispatch is in flight.
func (p *Postgres) BeginDispatch(string) func() { return func() {} }

// Dispatching implements Backend: see BeginDispatch.
func (p *Postgres) Dispatching(string) bool { return false }

// UpdateGroup implements Backend: each grouped write on a shared store
// needs its claim checked (replay's commit queue does it).
func (p *Postgres) UpdateGroup(_ context.Context, fns []func(Tx) error) []error {
	errs := make([]error, len(fns))
	for i := range errs {
		errs[i] = ErrNotImplemented
	}
	return errs
}
