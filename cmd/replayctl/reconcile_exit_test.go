package main

import (
	"errors"
	"testing"

	"github.com/replayctl/replayctl/internal/replay"
)

// A run that tried to replay and reached no target (every attempt not
// sent: the target is down) fails for its scheduler with exit 5; it exited
// 0, so a CronJob or timer reported success while nothing was replayed.
// Some attempts reaching the target, or nothing to send, stay exit 0.
func TestReconcileExitWhenEveryAttemptWasNotSent(t *testing.T) {
	report := func(dispatched, succeeded, retried, notSent, failed int) *replay.Report {
		rep := &replay.Report{}
		rep.Replays.Dispatched, rep.Replays.Succeeded, rep.Replays.Retried, rep.Replays.NotSent, rep.Replays.Failed =
			dispatched, succeeded, retried, notSent, failed
		return rep
	}
	for _, c := range []struct {
		name string
		rep  *replay.Report
		want int
	}{
		{"every attempt not sent", report(3, 0, 0, 3, 0), exitNotSent},
		{"some reached the target", report(3, 1, 0, 2, 0), exitOK},
		{"a 500 retry reached the target", report(3, 0, 1, 2, 0), exitOK},
		{"every attempt found the target down (503s and not sent)", func() *replay.Report {
			rep := report(3, 0, 2, 1, 0)
			rep.Replays.TargetDown = 3
			return rep
		}(), exitNotSent},
		{"nothing to send", report(0, 0, 0, 0, 0), exitOK},
		{"a definite failure besides", report(3, 0, 0, 2, 1), exitFailed},
	} {
		err := reconcileExit(c.rep, false)
		got := exitOK
		var ee *exitErr
		if errors.As(err, &ee) {
			got = ee.code
		}
		if got != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.want)
		}
	}
}
