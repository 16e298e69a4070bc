package maintenance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Group starts services in the order they were added and stops them in
// the reverse order, so a duty stops after every duty that depends on it
// (the sealer's last seal after the reconcile schedule's last run).
type Group struct {
	log      *slog.Logger
	mu       sync.Mutex
	services []Service
	started  []Service
}

// NewGroup returns an empty group that logs each start and stop to log.
func NewGroup(log *slog.Logger) *Group {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Group{log: log}
}

// Add appends services; add them before Start.
func (g *Group) Add(s ...Service) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.services = append(g.services, s...)
}

// Start starts every service in order. When one fails to start, those
// already started are stopped and its error returned.
func (g *Group) Start(ctx context.Context) error {
	g.mu.Lock()
	services := append([]Service(nil), g.services...)
	g.mu.Unlock()
	for _, s := range services {
		if err := s.Start(ctx); err != nil {
			g.Stop()
			return fmt.Errorf("start %s: %w", s.Name(), err)
		}
		g.mu.Lock()
		g.started = append(g.started, s)
		g.mu.Unlock()
		attrs := []any{"service", s.Name()}
		if r, ok := s.(Reporter); ok && r.Status().Every > 0 {
			attrs = append(attrs, "every", r.Status().Every.String())
		}
		g.log.Info("maintenance service started", attrs...)
	}
	return nil
}

// Stop stops the started services, last started first; each Stop returns
// once its service ended.
func (g *Group) Stop() {
	g.mu.Lock()
	started := g.started
	g.started = nil
	g.mu.Unlock()
	g.stop(started)
}

func (g *Group) stop(started []Service) {
	for i := len(started) - 1; i >= 0; i-- {
		s := started[i]
		s.Stop()
		g.log.Info("maintenance service stopped", "service", s.Name())
	}
}

// Statuses returns the record of every service that keeps one, in the
// order they were added.
func (g *Group) Statuses() []Status {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	services := append([]Service(nil), g.services...)
	g.mu.Unlock()
	var out []Status
	for _, s := range services {
		if r, ok := s.(Reporter); ok {
			out = append(out, r.Status())
		}
	}
	return out
}

// Summary is one line for /readyz: "ok", or each duty whose last round
// failed, with its error and when.
func (g *Group) Summary(now time.Time) string {
	var bad []string
	for _, s := range g.Statuses() {
		if s.LastErr != "" {
			bad = append(bad, fmt.Sprintf("%s: last round failed %s ago: %s", s.Name, now.Sub(s.LastRun).Round(time.Second), s.LastErr))
		}
	}
	if len(bad) == 0 {
		return "ok"
	}
	return strings.Join(bad, "; ")
}

// Loop is a service around a function that runs until its context ends
// (the reconcile schedule): Stop cancels it and waits for it to return.
type Loop struct {
	startStop
	name string
	run  func(ctx context.Context)
	st   stats
}

// NewLoop builds a Loop named name around run.
func NewLoop(name string, run func(ctx context.Context)) *Loop {
	return &Loop{name: name, run: run, st: stats{s: Status{Name: name}}}
}

// Name implements Service.
func (l *Loop) Name() string { return l.name }

// Status implements Reporter.
func (l *Loop) Status() Status { return l.st.get() }

// Start implements Service.
func (l *Loop) Start(ctx context.Context) error {
	ctx, done, ok := l.begin(ctx)
	if !ok {
		return nil
	}
	l.st.begin()
	go func() {
		defer close(done)
		defer l.st.interrupted(time.Time{})
		l.run(ctx)
	}()
	return nil
}
