package replay

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// One circuit breaker per target (STYLE.md "One breaker and one limiter
// per target"): consecutive answers saying the target is down (connection
// refused, timeouts, 502/503/504) open it; while it is open nothing for
// that target is claimed, so no attempt is made or counted; after the
// cool-down one trial request half-opens it, and its answer closes or
// re-opens it.
//
// gobreaker counts, trips, admits the single half-open trial and drops
// answers from before a state change (its generation counter). It reads
// time.Now itself, so the cool-down is kept here on the injected clock:
// gobreaker's own Timeout is the smallest there is, and no request reaches
// it while our clock says the breaker is still cooling down. Every call
// into gobreaker is made under b.mu, which is why OnStateChange (called by
// gobreaker inside those calls) may update b's state without locking.

// Breaker states as shown in stats, metrics and the audit chain.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half_open"
)

// Breaker defaults.
const (
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = time.Minute
)

// BreakerState is one target's breaker, for metrics, stats, the API and
// the UI.
type BreakerState struct {
	Target string    `json:"target"`
	State  string    `json:"state"`
	Since  time.Time `json:"since,omitzero"`
	// Until is when an open breaker lets one trial through.
	Until time.Time `json:"until,omitzero"`
	// Failures is the current run of consecutive target-down answers.
	Failures uint32 `json:"consecutive_failures"`
}

// BreakerChange is one state change, audited by the runner that caused it.
type BreakerChange struct {
	Target   string
	From, To string
	At       time.Time
}

// Breakers holds the breakers of every target. One is shared by all the
// runs of a process (serve's scheduler passes the same one to each run)
// so an outage seen by one run keeps the next from hammering the target.
type Breakers struct {
	// Failures is how many consecutive target-down answers open a
	// breaker (default 5); Cooldown how long it stays open (default 1m).
	Failures uint32
	Cooldown time.Duration
	Clock    Clock

	mu      sync.Mutex
	targets map[string]*targetBreaker
	changes []BreakerChange
}

type targetBreaker struct {
	cb    *gobreaker.TwoStepCircuitBreaker[struct{}]
	state string
	since time.Time
}

// errTargetDown is the failure a breaker counts; errNotDispatched makes
// gobreaker forget an admitted request that never went out (the claim
// failed), so it counts neither way.
var (
	errTargetDown    = errors.New("target down")
	errNotDispatched = errors.New("not dispatched")
)

// NewBreakers returns breakers on clk with the defaults.
func NewBreakers(clk Clock) *Breakers {
	return &Breakers{Clock: clk}
}

func (b *Breakers) get(target string) *targetBreaker {
	if b.targets == nil {
		b.targets = map[string]*targetBreaker{}
	}
	tb := b.targets[target]
	if tb != nil {
		return tb
	}
	trip := b.Failures
	if trip == 0 {
		trip = DefaultBreakerFailures
	}
	tb = &targetBreaker{state: BreakerClosed}
	tb.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        target,
		MaxRequests: 1,
		Timeout:     time.Nanosecond, // the cool-down is ours, on the injected clock
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= trip },
		IsExcluded:  func(err error) bool { return errors.Is(err, errNotDispatched) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			// Called inside a gobreaker call, which we only make under b.mu.
			now := b.Clock.Now()
			st := stateName(to)
			b.changes = append(b.changes, BreakerChange{Target: name, From: tb.state, To: st, At: now})
			tb.state, tb.since = st, now
		},
	})
	b.targets[target] = tb
	return tb
}

func (b *Breakers) cooldown() time.Duration {
	if b.Cooldown <= 0 {
		return DefaultBreakerCooldown
	}
	return b.Cooldown
}

// allow asks whether a dispatch to target may start. When it may, done
// must be called with the dispatch's result (nil when it never went out);
// when it may not, until is when the next trial is allowed.
func (b *Breakers) allow(target string) (done func(*Result), until time.Time, ok bool) {
	if b == nil {
		return func(*Result) {}, time.Time{}, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	tb := b.get(target)
	now := b.Clock.Now()
	if tb.state == BreakerOpen && now.Before(tb.since.Add(b.cooldown())) {
		return nil, tb.since.Add(b.cooldown()), false
	}
	gdone, err := tb.cb.Allow()
	if err != nil {
		// Half-open with its one trial already out: its answer, due within
		// the target's timeout, decides; look again shortly, not after a
		// whole cool-down.
		return nil, now.Add(min(time.Second, b.cooldown())), false
	}
	return func(res *Result) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch {
		case res == nil:
			gdone(errNotDispatched)
		case res.TargetDown:
			gdone(errTargetDown)
		default:
			gdone(nil) // the target answered: it is up, whatever it said
		}
	}, time.Time{}, true
}

// States returns every known target's breaker, sorted by target.
func (b *Breakers) States() []BreakerState {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]BreakerState, 0, len(b.targets))
	for name, tb := range b.targets {
		s := BreakerState{Target: name, State: tb.state, Since: tb.since, Failures: tb.cb.Counts().ConsecutiveFailures}
		if tb.state == BreakerOpen {
			s.Until = tb.since.Add(b.cooldown())
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}

// BreakerStates is the breakers this Reconciler dispatches through (shared
// with other runs when Breakers was given), for stats, metrics and the API.
func (r *Reconciler) BreakerStates() []BreakerState { return r.Breakers.States() }

// takeChanges returns the state changes not yet audited.
func (b *Breakers) takeChanges() []BreakerChange {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.changes
	b.changes = nil
	return out
}

// requeue puts back changes whose audit record could not be written, in
// front of any taken since, for the next auditBreakers.
func (b *Breakers) requeue(changes []BreakerChange) {
	if b == nil || len(changes) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.changes = append(append([]BreakerChange(nil), changes...), b.changes...)
}

func stateName(s gobreaker.State) string {
	switch s {
	case gobreaker.StateOpen:
		return BreakerOpen
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	}
	return BreakerClosed
}
