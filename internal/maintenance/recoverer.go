package maintenance

import (
	"context"
	"errors"

	"github.com/replayctl/replayctl/internal/replay"
)

// ErrSharedStore: recovery by a sweep is for a store one process holds
// (bbolt). On a shared store (PostgreSQL) a dispatching record may be
// another live worker's; there the worker that claims the entry after its
// lease ended recovers it (replay's claim path), never a sweep.
var ErrSharedStore = errors.New("recovery sweeps need a store one process holds (bbolt); on a shared store the next claim of the entry recovers it")

// NewRecoverer is the duty that turns dispatches left without an outcome
// by a process that is gone (killed during a run, a single or a bulk
// replay) into outcome_unknown, audited, with the entry marked unknown
// (replay.Recover): at start, so a restarted serve shows them at once
// whether or not a run is scheduled, then every o.Every for a dispatch of
// this process whose outcome write failed. A dispatch in flight here is
// left alone.
func NewRecoverer(st replay.Store, actor string, o Options) (*Periodic, error) {
	if st.Features().Shared {
		return nil, ErrSharedStore
	}
	o.Immediate = true
	return NewPeriodic("recover-dispatches", o, func(ctx context.Context) ([]any, error) {
		n, err := replay.Recover(ctx, st, actor)
		if n > 0 {
			return []any{"recovered", n, "now", "outcome_unknown"}, err
		}
		return nil, err
	})
}
