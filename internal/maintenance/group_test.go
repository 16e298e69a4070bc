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

// recorded is a service that notes its starts and stops in a shared log.
type recorded struct {
	name    string
	failing bool
	mu      *sync.Mutex
	log     *[]string
}

func (r recorded) Name() string { return r.name }

func (r recorded) Start(context.Context) error {
	if r.failing {
		return errors.New("cannot start")
	}
	r.mu.Lock()
	*r.log = append(*r.log, "start "+r.name)
	r.mu.Unlock()
	return nil
}

func (r recorded) Stop() {
	r.mu.Lock()
	*r.log = append(*r.log, "stop "+r.name)
	r.mu.Unlock()
}

// The group starts its services in order, stops them in reverse order,
// logs each by name; a service that fails to start stops those started.
func TestGroupStartsInOrderStopsInReverse(t *testing.T) {
	var mu sync.Mutex
	var got []string
	var logs bytes.Buffer
	g := NewGroup(slog.New(slog.NewTextHandler(&logs, nil)))
	g.Add(recorded{name: "a", mu: &mu, log: &got}, recorded{name: "b", mu: &mu, log: &got}, recorded{name: "c", mu: &mu, log: &got})
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.Stop()
	g.Stop()
	if want := "start a,start b,start c,stop c,stop b,stop a"; strings.Join(got, ",") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
	for _, name := range []string{"a", "b", "c"} {
		for _, verb := range []string{"started", "stopped"} {
			if !strings.Contains(logs.String(), "msg=\"maintenance service "+verb+"\" service="+name) {
				t.Errorf("no %s line for %s:\n%s", verb, name, logs.String())
			}
		}
	}

	got = nil
	g = NewGroup(nil)
	g.Add(recorded{name: "a", mu: &mu, log: &got}, recorded{name: "bad", failing: true}, recorded{name: "c", mu: &mu, log: &got})
	if err := g.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "start bad") {
		t.Fatalf("a failed start: %v", err)
	}
	if want := "start a,stop a"; strings.Join(got, ",") != want {
		t.Fatalf("after a failed start %v, want %s", got, want)
	}
}

// The group's statuses and summary report each duty's last round; a Loop
// runs until its Stop.
func TestGroupReportsAndLoops(t *testing.T) {
	before := runtime.NumGoroutine()
	ticks := newManualTicks()
	failing, err := NewPeriodic("retention", Options{Every: time.Hour, Tick: ticks.tick},
		func(context.Context) ([]any, error) { return nil, errors.New("rules: version v9") })
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	loop := NewLoop("reconcile-schedule", func(ctx context.Context) { close(ran); <-ctx.Done() })
	g := NewGroup(nil)
	g.Add(loop, failing)
	if got := g.Summary(time.Now()); got != "ok" {
		t.Fatalf("before any round: %q", got)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-ran
	ticks.fire(t)
	waitRuns(t, failing, 1)
	if got := g.Summary(time.Now()); !strings.HasPrefix(got, "retention: last round failed") || !strings.Contains(got, "rules: version v9") {
		t.Fatalf("summary %q", got)
	}
	st := g.Statuses()
	if len(st) != 2 || st[0].Name != "reconcile-schedule" || !st[0].Running || st[1].Errors != 1 {
		t.Fatalf("statuses %+v", st)
	}
	g.Stop()
	if loop.Status().Running {
		t.Fatal("the loop still shows running after its stop")
	}
	goroutinesBack(t, before)
}
