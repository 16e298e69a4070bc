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
