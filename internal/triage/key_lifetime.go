package triage

import (
	"fmt"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
)

// KeyLifetimeReason starts the reason given when an entry is older than its
// target's key_lifetime: previews and the entry page show it as it is.
const KeyLifetimeReason = "key_lifetime"

// keyLifetimeExceeded reports whether the entry is older than the
// key_lifetime of the target its replay would go to, and why. A target's
// dedup only protects a replay while it still remembers the key (Stripe
// may prune keys after 24 hours); past that a replay with the same key can
// be applied twice, so a person approves it. The age is counted from the
// key's first dispatch, or, never dispatched, from the entry's first
// failure (its oldest history record when the source gives no first
// failure). An entry whose age cannot be told is treated as too old: a key
// that may have expired is not replayed unattended. Without a decision
// time (view.At zero) the guard is not applied.
func (r *Rules) keyLifetimeExceeded(e *entry.Entry, view LedgerView) (string, bool) {
	if view.At.IsZero() {
		return "", false
	}
	t := r.TargetFor(e)
	if t == nil || t.KeyLifetime <= 0 {
		return "", false
	}
	since, what := view.FirstDispatch, "first dispatched"
	if since.IsZero() {
		since, what = firstFailure(e), "first failed"
	}
	if since.IsZero() {
		return fmt.Sprintf("%s %s of target %s: the entry's age is unknown (no dispatch, no failure time): a person approves the replay",
			KeyLifetimeReason, shortDuration(t.KeyLifetime), t.TargetName()), true
	}
	age := view.At.Sub(since)
	if age <= t.KeyLifetime {
		return "", false
	}
	return fmt.Sprintf("%s %s of target %s exceeded: %s %s, %s ago; the target may no longer dedupe the key, a person approves the replay",
		KeyLifetimeReason, shortDuration(t.KeyLifetime), t.TargetName(), what, since.UTC().Format(time.RFC3339), shortDuration(age.Truncate(time.Second))), true
}

// firstFailure is the entry's first failure time: FirstFailure, else the
// oldest time in its history.
func firstFailure(e *entry.Entry) time.Time {
	first := e.FirstFailure
	for _, f := range e.History {
		if !f.Time.IsZero() && (first.IsZero() || f.Time.Before(first)) {
			first = f.Time
		}
	}
	return first
}

// shortDuration writes d as rules.yaml would: 24h, not 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
