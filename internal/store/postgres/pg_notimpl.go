package postgres

import (
	"context"

	"github.com/replayctl/replayctl/internal/store"
)

// What each backend answers of the contract (Backend) for what it lacks:
// ErrNotImplemented, or the answer that is true of it (bbolt has no
// claims to release; PostgreSQL tracks no dispatch in a process, its
// leases decide). Callers key on Features and never reach these.

// BeginDispatch implements Backend: on a shared store the lease, not the
// process, says whether a dispatch is in flight.
func (p *Postgres) BeginDispatch(string) func() { return func() {} }

// Dispatching implements Backend: see BeginDispatch.
func (p *Postgres) Dispatching(string) bool { return false }

// UpdateGroup implements Backend: each grouped write on a shared store
// needs its claim checked (replay's commit queue does it).
func (p *Postgres) UpdateGroup(_ context.Context, fns []func(store.Tx) error) []error {
	errs := make([]error, len(fns))
	for i := range errs {
		errs[i] = store.ErrNotImplemented
	}
	return errs
}
