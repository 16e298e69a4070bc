package replay

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Clock is the runner's time: injected so that backoff, rate limits and
// spreads are tested without sleeping.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or returns ctx's error when it is done first.
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep implements Clock.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// pacer spaces dispatches: a token bucket of rate per second (burst 1),
// read against the injected clock.
type pacer struct {
	mu  sync.Mutex
	lim *rate.Limiter
	clk Clock
}

func newPacer(perSecond float64, clk Clock) *pacer {
	if perSecond <= 0 {
		return nil
	}
	return &pacer{lim: rate.NewLimiter(rate.Limit(perSecond), 1), clk: clk}
}

// wait blocks until the next dispatch may start.
func (p *pacer) wait(ctx context.Context) error {
	if p == nil {
		return ctx.Err()
	}
	p.mu.Lock()
	now := p.clk.Now()
	delay := p.lim.ReserveN(now, 1).DelayFrom(now)
	p.mu.Unlock()
	return p.clk.Sleep(ctx, delay)
}

// pacers holds one pacer per route (issue 28: --rate applies per
// destination, a queue, a topic or a target, as the breakers do): a run
// replaying to two queues sends at most rate per second to each.
type pacers struct {
	perSecond float64
	clk       Clock
	mu        sync.Mutex
	by        map[string]*pacer // by route name
}

func newPacers(perSecond float64, clk Clock) *pacers {
	if perSecond <= 0 {
		return nil
	}
	return &pacers{perSecond: perSecond, clk: clk, by: map[string]*pacer{}}
}

// wait blocks until the route's next dispatch may start.
func (ps *pacers) wait(ctx context.Context, route string) error {
	if ps == nil {
		return ctx.Err()
	}
	ps.mu.Lock()
	p := ps.by[route]
	if p == nil {
		p = newPacer(ps.perSecond, ps.clk)
		ps.by[route] = p
	}
	ps.mu.Unlock()
	return p.wait(ctx)
}

// keyLocks serialises work on one idempotency key inside a process, so
// two entries with the same key never race to dispatch.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

func (k *keyLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
