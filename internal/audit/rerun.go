package audit

import (
	"context"
	"errors"

	"github.com/replayctl/replayctl/internal/triage"
)

// ErrNoInputs: the record is not a decision that kept its inputs (a record
// of another kind, or one written before inputs were recorded), so it
// cannot be decided again.
var ErrNoInputs = errors.New("not a decision with recorded inputs")

// Rerun decides a recorded decision again with eng, from the inputs the
// record kept: the entry (without its payload, whose hash the decision
// holds) and the ledger view. A view recorded without its decision time
// (written before views carried one) is judged at the record's own time,
// never at the wall clock: `audit replay-decision` and `policy backtest`
// ask what would have been decided then.
func (r *Record) Rerun(ctx context.Context, eng *triage.Engine) (triage.Decision, error) {
	if r.Kind != KindDecision || r.Decision == nil || r.Input == nil {
		return triage.Decision{}, ErrNoInputs
	}
	if h := r.Decision.GroupHold; h != nil {
		eng = eng.WithHolds(triage.Holds{h.Group: *h}) // the hold in force then: an input
	}
	e := *r.Input
	view := r.Decision.Ledger
	if view.At.IsZero() {
		view.At = r.Time
	}
	return eng.DecideWithPayloadHash(ctx, &e, view, r.Decision.PayloadHash), nil
}
