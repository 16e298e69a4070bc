package replay

import (
	"testing"

	"github.com/replayctl/replayctl/internal/runs"
)

// A run's counts agree with the reconcile summary and exit code: an entry
// whose attempt never reached a down target (not_sent) or that waits for a
// retry is not a failed dispatch; failed and outcome_unknown are. (Found
// using `runs list` after a reconcile against a target that was down: the
// summary said "0 failed", the run said 2.)
func TestRunCountsDispatchesAsTheSummaryDoes(t *testing.T) {
	for _, c := range []struct {
		last string
		want runs.Outcome
	}{
		{"succeeded", runs.Success},
		{"handled_elsewhere", runs.Success},
		{"failed", runs.Failure},
		{"outcome_unknown", runs.Failure},
		{"not_sent", runs.Other},
		{"retry", runs.Other},
	} {
		if got := (EntryResult{Replays: []string{"retry", c.last}}).RunOutcome(); got != c.want {
			t.Errorf("reconcile entry ending %s counts as %v, want %v", c.last, got, c.want)
		}
		if got := (BulkItem{Category: WhyReplay, Outcome: c.last}).RunOutcome(); got != c.want {
			t.Errorf("bulk replay ending %s counts as %v, want %v", c.last, got, c.want)
		}
	}
}
