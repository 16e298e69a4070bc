package replay

import (
	"hash/fnv"
	"math"
	"strconv"
	"time"

	"github.com/replayctl/replayctl/internal/triage"
)

// A retry is a due time on the entry, never a sleeping worker (River's
// retrypolicy.NextRetryAt, asynq's RetryDelayFunc): a dispatch that failed
// in a retryable way records EntryRecord.NextAttemptAt and the run moves
// on; a later run (cron, `serve`'s scheduler, or this run's --max-wait)
// dispatches the entry once that time has come, with the same key.

// Reasons and outcomes a run reports for entries it did not dispatch.
const (
	// OutcomeScheduled: the entry's retry is not due yet.
	OutcomeScheduled = "retry_scheduled"
	// OutcomeUnavailable: the target's circuit breaker is open.
	OutcomeUnavailable = "target_unavailable"
)

// retryDelay is the wait before retry n (n >= 1: the attempt that just
// failed) under b: a pure function of (b, n, key), so a run needs no
// backoff state across runs. Exponential grows Initial by Multiplier per
// attempt, capped at Max; exponential_jitter spreads it by +-50% with a
// jitter derived from the key and n (deterministic, so tests and
// replay-decision see the same schedule, yet entries failed by one outage
// do not all come due at once); constant is Initial.
func retryDelay(b triage.Backoff, n int, key string) time.Duration {
	if b.Initial <= 0 {
		b = triage.DefaultBackoff()
	}
	n = max(n, 1)
	if b.Strategy == triage.BackoffConstant {
		return b.Initial
	}
	mult := b.Multiplier
	if mult < 1 {
		mult = 2
	}
	d := float64(b.Initial) * math.Pow(mult, float64(n-1))
	if b.Max > 0 && d > float64(b.Max) {
		d = float64(b.Max)
	}
	if b.Strategy == triage.BackoffExponentialJitter || b.Strategy == "" {
		d *= 0.5 + unitHash(key, n) // [0.5, 1.5)
	}
	if b.Max > 0 && d > float64(b.Max) {
		d = float64(b.Max)
	}
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

// unitHash maps (key, n) to [0, 1).
func unitHash(key string, n int) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(strconv.Itoa(n)))
	return float64(h.Sum64()>>11) / float64(1<<53)
}

// scheduledReason is what an entry waiting for its retry says.
func scheduledReason(at time.Time) string {
	return "retry scheduled at " + at.UTC().Format(time.RFC3339)
}
