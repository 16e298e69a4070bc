package maintenance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// LeaseRenewer is a shared store that extends a claim still current
// (PostgreSQL's RenewLease: under the claim's fencing token, only while
// its lease has not ended).
type LeaseRenewer interface {
	RenewLease(ctx context.Context, ref string, token int64, lease time.Duration) (bool, error)
}

// Leases is the lease-renewal duty, after asynq's heartbeater: a worker
// registers each claim it holds (Hold) and drops it when done (Release);
// every round renews each hold with less than three quarters of its lease
// left, as the runner does inline before a dispatch (replay's keepClaim),
// so a claim outlives a long wait however many places it waits in. A
// hold whose renewal finds the claim gone (its lease ran out, another
// worker took the entry) is marked lost and dropped: its holder must not
// send (its next owner finds the intent and recovers it).
type Leases struct {
	*Periodic
	st    LeaseRenewer
	lease time.Duration
	now   func() time.Time
	mu    sync.Mutex
	holds map[int64]*Hold
}

// Hold is one claim kept alive by Leases.
type Hold struct {
	Ref   string
	Token int64
	mu    sync.Mutex
	until time.Time
	lost  bool
}

// Until is when the claim's lease ends at the latest, on this process's
// clock.
func (h *Hold) Until() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until
}

// Lost reports whether a renewal found the claim gone.
func (h *Hold) Lost() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// NewLeases builds the duty for claims of length lease; a round runs
// every o.Every (a quarter of the lease when zero).
func NewLeases(st LeaseRenewer, lease time.Duration, o Options) (*Leases, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("maintenance lease-renewal: the lease must be positive, got %s", lease)
	}
	if o.Every <= 0 {
		o.Every = lease / 4
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &Leases{st: st, lease: lease, now: o.Now, holds: map[int64]*Hold{}}
	p, err := NewPeriodic("lease-renewal", o, l.renew)
	if err != nil {
		return nil, err
	}
	l.Periodic = p
	return l, nil
}

// Hold registers a claim (its ref, fencing token and lease end) to keep
// alive until Release.
func (l *Leases) Hold(ref string, token int64, until time.Time) *Hold {
	h := &Hold{Ref: ref, Token: token, until: until}
	l.mu.Lock()
	l.holds[token] = h
	l.mu.Unlock()
	return h
}

// Release stops renewing h.
func (l *Leases) Release(h *Hold) {
	l.mu.Lock()
	delete(l.holds, h.Token)
	l.mu.Unlock()
}

// Held is the number of claims kept alive now.
func (l *Leases) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.holds)
}

// renew is one round: every hold with less than three quarters of its
// lease left is renewed; a failed renewal is retried next round (its
// claim may still run out: then the next renewal finds it lost).
func (l *Leases) renew(ctx context.Context) ([]any, error) {
	now := l.now()
	var due []*Hold
	l.mu.Lock()
	for _, h := range l.holds {
		if h.Until().Sub(now) < l.lease*3/4 {
			due = append(due, h)
		}
	}
	l.mu.Unlock()
	var errs []error
	lost := 0
	for _, h := range due {
		t0 := l.now()
		held, err := l.st.RenewLease(ctx, h.Ref, h.Token, l.lease)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !held:
			h.mu.Lock()
			h.lost = true
			h.mu.Unlock()
			l.Release(h)
			lost++
		default:
			h.mu.Lock()
			h.until = t0.Add(l.lease)
			h.mu.Unlock()
		}
	}
	var did []any
	if lost > 0 {
		did = []any{"lost", lost, "renewed", len(due) - lost - len(errs)}
	}
	return did, errors.Join(errs...)
}
