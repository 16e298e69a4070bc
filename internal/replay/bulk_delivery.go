package replay

import (
	"fmt"
	"strings"
)

// Delivery is what happened to the entries an executed bulk replay set out
// to replay, by what the operator needs to know. A run that ended
// "succeeded, replay: 21 done" had delivered none of them (7 scheduled for
// a retry, 14 held by an open breaker; issue 30): a bulk replay succeeds
// only when every one was delivered.
type Delivery struct {
	Delivered     int `json:"delivered"`       // succeeded, or found handled elsewhere
	Scheduled     int `json:"scheduled"`       // not delivered yet: a retry is due later (retry, not sent)
	HeldByBreaker int `json:"held_by_breaker"` // nothing sent: the target's breaker was open
	Failed        int `json:"failed"`          // failed, or the outcome is unknown
	Refused       int `json:"refused"`         // not sent: decided otherwise when executed (policy, approval, ledger, ...)
}

// DeliveryOf sorts the executed entries the operation planned to replay by
// their last outcome. A preview or a resolve has none.
func DeliveryOf(r *BulkReport) Delivery {
	var d Delivery
	if r == nil || r.Preview {
		return d
	}
	for outcome, n := range r.Replays {
		switch outcome {
		case Succeeded.String(), HandledElsewhere.String():
			d.Delivered += n
		case Retry.String(), NotSent.String():
			d.Scheduled += n
		case BulkTargetUnavailable:
			d.HeldByBreaker += n
		case Failed.String(), Unknown.String():
			d.Failed += n
		default: // the action decided at execution: manual_review, skip, ...
			d.Refused += n
		}
	}
	return d
}

// Complete: every entry planned for a replay was delivered (the others
// were left on purpose and counted by why).
func (d Delivery) Complete() bool {
	return d.Scheduled+d.HeldByBreaker+d.Failed+d.Refused == 0
}

// String says it in the words of a run's summary: "0 delivered, 7
// scheduled for a retry, 14 held by an open breaker".
func (d Delivery) String() string {
	parts := []string{fmt.Sprintf("%d delivered", d.Delivered)}
	for _, p := range []struct {
		n    int
		what string
	}{{d.Scheduled, "scheduled for a retry"}, {d.HeldByBreaker, "held by an open breaker"},
		{d.Failed, "failed or outcome unknown"}, {d.Refused, "refused when executed"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return strings.Join(parts, ", ")
}
