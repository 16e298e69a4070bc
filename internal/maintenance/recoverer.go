package maintenance

import (
	"context"

	"github.com/replayctl/replayctl/internal/replay"
)

// NewRecoverer is the duty that turns dispatches left without an outcome
// by a process that is gone (killed during a run, a single or a bulk
// replay) into outcome_unknown, audited, with the entry marked unknown
// (replay.Recover): at start, so a restarted serve shows them at once
// whether or not a run is scheduled, then every o.Every for a dispatch of
// this process whose outcome write failed. A dispatch in flight here is
// left alone; on a shared store (PostgreSQL) so is one whose worker's
// lease is live: the sweep recovers a dispatch only under the entry's own
// claim, which it gets once that lease has ended, fenced as the next
// worker's claim would be.
func NewRecoverer(st replay.Store, actor string, o Options) (*Periodic, error) {
	o.Immediate = true
	return NewPeriodic("recover-dispatches", o, func(ctx context.Context) ([]any, error) {
		n, err := replay.Recover(ctx, st, actor)
		if n > 0 {
			return []any{"recovered", n, "now", "outcome_unknown"}, err
		}
		return nil, err
	})
}
