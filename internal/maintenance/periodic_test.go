package maintenance

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// A periodic duty runs one round per tick, counts failed rounds, stops
// with no goroutine left, and runs Final once at Stop; a second Stop and
// a Stop without Start do nothing.
func TestPeriodicRunsPerTickAndStopsClean(t *testing.T) {
	before := runtime.NumGoroutine()
	ticks := newManualTicks()
	var mu sync.Mutex
	rounds, finals := 0, 0
	var logs bytes.Buffer
	p, err := NewPeriodic("test-duty", Options{Every: time.Hour, Tick: ticks.tick, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Final: func(context.Context) error { mu.Lock(); finals++; mu.Unlock(); return nil }},
		func(context.Context) ([]any, error) {
			mu.Lock()
			defer mu.Unlock()
			rounds++
			if rounds == 2 {
				return nil, errors.New("disk full")
			}
			return []any{"round", rounds}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	p.Stop() // never started: nothing to do
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil { // already running: no second loop
		t.Fatal(err)
	}
	if s := p.Status(); s.Runs != 0 {
		t.Fatalf("a round ran before the first tick: %+v", s)
	}
	ticks.fire(t)
	s := waitRuns(t, p, 1)
	if s.Errors != 0 || s.LastErr != "" || s.LastRun.IsZero() {
		t.Fatalf("after one good round: %+v", s)
	}
	ticks.fire(t)
	s = waitRuns(t, p, 2)
	if s.Errors != 1 || s.LastErr != "disk full" {
		t.Fatalf("after a failed round: %+v", s)
	}
	ticks.fire(t)
	if s = waitRuns(t, p, 3); s.Errors != 1 || s.LastErr != "" {
		t.Fatalf("a good round after a failed one: %+v", s)
	}
	p.Stop()
	p.Stop()
	<-ticks.stopped
	goroutinesBack(t, before)
	mu.Lock()
	defer mu.Unlock()
	if rounds != 3 || finals != 1 {
		t.Fatalf("%d rounds, %d finals; want 3 and 1", rounds, finals)
	}
	for _, want := range []string{"service=test-duty round=1", "maintenance round failed", "err=\"disk full\""} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// A Stop while a round is in progress cancels the round's context and
// returns once it ended; the interrupted round is not counted as failed.
func TestPeriodicStopDuringARoundReturns(t *testing.T) {
	before := runtime.NumGoroutine()
	inRound := make(chan struct{})
	p, err := NewPeriodic("blocking", Options{Every: time.Hour, Immediate: true, Tick: newManualTicks().tick},
		func(ctx context.Context) ([]any, error) {
			close(inRound)
			<-ctx.Done()
			return nil, ctx.Err()
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-inRound
	if !p.Status().Running {
		t.Fatal("status does not show the round in progress")
	}
	p.Stop()
	if s := p.Status(); s.Running || s.Errors != 0 || s.Runs != 0 {
		t.Fatalf("after a stop mid-round: %+v", s)
	}
	goroutinesBack(t, before)
}

func TestPeriodicNeedsAnInterval(t *testing.T) {
	if _, err := NewPeriodic("x", Options{}, nil); err == nil || !strings.Contains(err.Error(), "interval") {
		t.Fatalf("no interval: %v", err)
	}
}
