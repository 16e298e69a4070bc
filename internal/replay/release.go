package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/runs"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Categories of a --reset-budget redrive (see the Why constants).
const (
	// WhyReArm: --reset-budget re-arms the entry (max_replays reached, or
	// failed) and replays it in the same operation.
	WhyReArm = "re-arm and replay"
	// WhyReArmOnly prefixes the category of an entry --reset-budget
	// re-arms that would still not be replayed now (it awaits approval,
	// say): "re-arm, then awaits approval".
	WhyReArmOnly = "re-arm, then "
	// WhyChanged: the entry changed between the preview and its turn.
	WhyChanged = "changed since the preview"
)

// ErrNothingDone: a single replay (`dlq replay ID`, `approvals approve
// --replay-now`) decided not to dispatch. It is an error so that a script
// never takes "exit 0" for "replayed" (issue 15: it used to say nothing).
var ErrNothingDone = errors.New("nothing replayed")

// NothingDone returns nil when a single replay did something (dispatched,
// or found by a probe to be committed already), otherwise ErrNothingDone
// naming why and what a person can do about it.
// UnknownWayOut tells a person what settles a key whose outcome is unknown:
// without a probe nothing opens an approval request, so "an approval" alone
// left them looking for one that did not exist.
const UnknownWayOut = "nothing sends it again until the target is asked: give the target a probe " +
	"(reconcile --probe URL, or probe: in rules.yaml) and the next reconcile asks it (not committed: an approval " +
	"request opens); if you checked the target yourself and it did happen, `dlq resolve ID --reason TEXT`"

func NothingDone(res *EntryResult) error {
	if res == nil || len(res.Replays) > 0 || res.Outcome == "probe_committed" {
		return nil
	}
	d := &res.Decision
	why := category(&store.EntryRecord{}, d)
	if res.Outcome == "no_target" {
		why = WhyNoTarget
	}
	hint := ""
	switch why {
	case WhyMaxReplays:
		why = fmt.Sprintf("%s (%d of %d)", why, d.Ledger.Used(), d.MaxReplays)
		hint = "; re-arm it with `dlq release ID` or `dlq replay --filter ... --reset-budget --reason TEXT`"
		if d.Ledger.LineageReplays > d.Ledger.Replays {
			why += " across lineage " + d.Ledger.Lineage
			hint = "; release the lineage's budget with `dlq release-lineage ID --reason TEXT`"
		}
	case WhyApproval, WhyKeyLifetime:
		hint = "; approve it with `approvals approve ID --replay-now`"
	case WhyCommitted:
		hint = "; its key already succeeded, it is never sent twice"
	case WhyUnknown:
		hint = "; " + UnknownWayOut
	}
	detail := res.Reason
	if detail == "" && len(d.Reasons) > 0 {
		detail = d.Reasons[len(d.Reasons)-1]
	}
	if detail != "" {
		detail = ": " + detail
	}
	return fmt.Errorf("%w: %s: %s (action %s)%s%s", ErrNothingDone, res.Ref, why, actionOr(res.Final, d.Action), detail, hint)
}

func actionOr(a, def triage.Action) triage.Action {
	if a == "" {
		return def
	}
	return a
}

// replayPlan is what a bulk replay does with one entry: its category and,
// with ResetBudget, whether it is re-armed first. An entry is re-armed when
// it reached max_replays or its replay failed; what happens after the
// re-arm is decided as the runner will decide it then (a fresh budget,
// a failed key decided again), so the preview says what execution does.
func (b *Bulk) replayPlan(ctx context.Context, er *store.EntryRecord) (string, bool, *prepared, error) {
	r := b.Reconciler
	p, err := r.decideForBulk(ctx, er)
	if err != nil {
		return "", false, nil, err
	}
	pre := p
	if p.ledger.State == idempotency.Dispatching {
		pre = nil // its replay recovers the key first, and decides then (claim.go)
	}
	cat := b.replayCategory(er, &p.decision)
	if !b.ResetBudget || !rearmable(er, cat) {
		return cat, false, pre, nil
	}
	after, err := r.decideRearmed(ctx, er, p.approval)
	if errors.Is(err, ErrState) {
		return cat, false, pre, nil // Release would refuse it too
	} else if err != nil {
		return "", false, nil, err
	}
	released := *er
	released.Hold = ""
	switch next := b.replayCategory(&released, &after); next {
	case WhyReplay:
		return WhyReArm, true, nil, nil
	case WhyNoTarget:
		// Re-arming it would change nothing; the operation is refused
		// for it as for any replay with nowhere to go.
		return WhyNoTarget, false, pre, nil
	default:
		return WhyReArmOnly + next, true, nil, nil
	}
}

// rearmable: reached max_replays (in manual review, not held), or failed
// definitively (held failed, ledger failed). Never outcome_unknown: a
// probe or a person decides those.
func rearmable(er *store.EntryRecord, cat string) bool {
	return cat == WhyMaxReplays && er.Hold == "" && er.Status == store.StatusManualReview ||
		er.Hold == store.HoldFailed
}

// decideRearmed decides an entry as it will be decided after Release:
// the max_replays count restarts and a failed key is decided again.
func (r *Reconciler) decideRearmed(ctx context.Context, er *store.EntryRecord, a *store.Approval) (triage.Decision, error) {
	e := er.Entry
	view, err := r.Store.LedgerView(ctx, e.IdempotencyKey)
	if err != nil {
		return triage.Decision{}, err
	}
	switch view.State {
	case triage.StateFailed, triage.StateDecided:
		view.State, view.Replays = triage.StateDecided, 0
	case "":
	default:
		return triage.Decision{}, fmt.Errorf("%w: %s: its key is %s, not re-armable", ErrState, e.Ref(), view.State)
	}
	if view, err = lineageView(ctx, r.Store, &e, view); err != nil {
		return triage.Decision{}, err
	}
	return r.decideOn(ctx, &e, view, a, "")
}

// track reports to b.Run: the total when item is nil, else one entry.
func (b *Bulk) track(total int, item *BulkItem) {
	if b.Run == nil {
		return
	}
	if item == nil {
		b.Run.SetTotal(total)
		return
	}
	b.Run.Observe(context.Background(), item.RunOutcome())
}

// RunOutcome is how an entry of a bulk operation counts in its run:
// succeeded or failed when acted on, held when it waits for people.
func (it BulkItem) RunOutcome() runs.Outcome {
	switch {
	case it.Category == WhyResolve:
		return runs.Success
	case acts(it.Category, WhyReplay):
		return dispatchRunOutcome(it.Outcome)
	case strings.HasPrefix(it.Category, WhyReArmOnly):
		return runs.Held
	}
	switch it.Category {
	case WhyApproval, WhyKeyLifetime, WhyMaxReplays, WhyManual, WhyQuarantined, WhyPolicy, WhyUnknown, WhyRejected, WhyNoTarget:
		return runs.Held
	}
	return runs.Other
}

// RunOutcome is how an entry of a reconcile counts in its run: by its
// last dispatch, or held when it waits for people.
func (res EntryResult) RunOutcome() runs.Outcome {
	if n := len(res.Replays); n > 0 {
		return dispatchRunOutcome(res.Replays[n-1])
	}
	switch res.Final {
	case triage.RequireApproval, triage.ManualReview, triage.Quarantine:
		return runs.Held
	}
	return runs.Other
}

// dispatchRunOutcome counts a dispatch's last outcome in its run as the
// run's summary and exit code do: failed and outcome_unknown are failures;
// an attempt to retry later (retry, not_sent: the target was down) is
// neither, the entry waits for its scheduled retry.
func dispatchRunOutcome(outcome string) runs.Outcome {
	switch outcome {
	case Succeeded.String(), HandledElsewhere.String():
		return runs.Success
	case Failed.String(), Unknown.String():
		return runs.Failure
	}
	return runs.Other
}
