package replay

import (
	"errors"
	"fmt"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// ErrNothingDone: a single replay (`dlq replay ID`, `approvals approve
// --replay-now`) decided not to dispatch. It is an error so that a script
// never takes "exit 0" for "replayed" (issue 15: it used to say nothing).
var ErrNothingDone = errors.New("nothing replayed")

// NothingDone returns nil when a single replay did something (dispatched,
// or found by a probe to be committed already), otherwise ErrNothingDone
// naming why and what a person can do about it.
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
		why = fmt.Sprintf("%s (%d of %d)", why, d.Ledger.Replays, d.MaxReplays)
		hint = "; re-arm it with `dlq release ID` or `dlq replay --filter ... --reset-budget --reason TEXT`"
	case WhyApproval:
		hint = "; approve it with `approvals approve ID --replay-now`"
	case WhyCommitted:
		hint = "; its key already succeeded, it is never sent twice"
	case WhyUnknown:
		hint = "; a probe or an approval decides a key whose outcome is unknown"
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
