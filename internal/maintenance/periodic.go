package maintenance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Work is one round of a periodic duty. did is what the round did, as
// log attributes (nil: nothing worth a line); an error fails the round,
// and the next round tries again.
type Work func(ctx context.Context) (did []any, err error)

// Options configure a Periodic duty.
type Options struct {
	// Every is the time between rounds (required).
	Every time.Duration
	// Immediate runs the first round at Start instead of one Every later.
	Immediate bool
	// Final runs once at Stop, after the last round ended, on a context
	// that Stop's cancellation does not end (the sealer's last seal).
	Final func(ctx context.Context) error
	// Logger gets the start, stop, round and error lines (default: none).
	Logger *slog.Logger
	// Now stamps the rounds (default time.Now).
	Now func() time.Time
	// Tick makes the ticker (default time.NewTicker): a test passes its
	// own channel and ticks by hand.
	Tick func(every time.Duration) (ticks <-chan time.Time, stop func())
}

// Periodic is a duty that runs Work every Options.Every.
type Periodic struct {
	startStop
	name string
	o    Options
	work Work
	st   stats
}

// NewPeriodic builds a periodic duty; it runs nothing before Start.
func NewPeriodic(name string, o Options, work Work) (*Periodic, error) {
	if o.Every <= 0 {
		return nil, fmt.Errorf("maintenance %s: the interval must be positive, got %s", name, o.Every)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Tick == nil {
		o.Tick = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	return &Periodic{name: name, o: o, work: work, st: stats{s: Status{Name: name, Every: o.Every}}}, nil
}

// Name implements Service.
func (p *Periodic) Name() string { return p.name }

// Status implements Reporter.
func (p *Periodic) Status() Status { return p.st.get() }

// Start implements Service.
func (p *Periodic) Start(ctx context.Context) error {
	ctx, done, ok := p.begin(ctx)
	if !ok {
		return nil
	}
	ticks, stopTicks := p.o.Tick(p.o.Every)
	go func() {
		defer close(done)
		defer stopTicks()
		if p.o.Immediate {
			p.round(ctx)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticks:
				p.round(ctx)
			}
		}
	}()
	return nil
}

// Stop implements Service: it ends the loop (a round in progress sees its
// context cancelled), then runs Final.
func (p *Periodic) Stop() {
	p.mu.Lock()
	running := p.done != nil
	p.mu.Unlock()
	p.startStop.Stop()
	if running && p.o.Final != nil {
		if err := p.o.Final(context.Background()); err != nil {
			p.st.failed(p.o.Now(), err)
			p.o.Logger.Error("maintenance: last round at stop failed", "service", p.name, "err", err)
		}
	}
}

func (p *Periodic) round(ctx context.Context) {
	p.st.begin()
	did, err := p.work(ctx)
	now := p.o.Now()
	switch {
	case err != nil && ctx.Err() != nil:
		p.st.interrupted(now) // stopped in the middle: not a failure
	case err != nil:
		p.st.failed(now, err)
		p.o.Logger.Error("maintenance round failed; the next round tries again", "service", p.name, "err", err)
	default:
		p.st.succeeded(now)
		if did != nil {
			p.o.Logger.Info("maintenance", append([]any{"service", p.name}, did...)...)
		}
	}
}

// Status is a duty's record, for /readyz and /metrics.
type Status struct {
	Name  string
	Every time.Duration // 0: not periodic
	// Runs and Errors count finished rounds and failed ones.
	Runs, Errors uint64
	// LastRun is when the last round ended (zero: none yet); LastErr is
	// its error ("" when it succeeded).
	LastRun time.Time
	LastErr string
	Running bool // a round is in progress
}

// Reporter is a service that keeps a Status.
type Reporter interface{ Status() Status }

type stats struct {
	mu sync.Mutex
	s  Status
}

func (st *stats) get() Status {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.s
}

func (st *stats) begin() {
	st.mu.Lock()
	st.s.Running = true
	st.mu.Unlock()
}

func (st *stats) succeeded(now time.Time) {
	st.mu.Lock()
	st.s.Running, st.s.Runs, st.s.LastRun, st.s.LastErr = false, st.s.Runs+1, now, ""
	st.mu.Unlock()
}

func (st *stats) failed(now time.Time, err error) {
	st.mu.Lock()
	st.s.Running, st.s.Runs, st.s.Errors, st.s.LastRun, st.s.LastErr = false, st.s.Runs+1, st.s.Errors+1, now, err.Error()
	st.mu.Unlock()
}

func (st *stats) interrupted(time.Time) {
	st.mu.Lock()
	st.s.Running = false
	st.mu.Unlock()
}
