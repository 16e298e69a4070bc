package maintenance

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/testsvc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testsvc.Stop()
	os.Exit(code)
}

// manualTicks is a ticker the test ticks by hand (the injected clock of
// every duty's test: no test waits for a real interval).
type manualTicks struct {
	c       chan time.Time
	stopped chan struct{}
}

func newManualTicks() *manualTicks {
	return &manualTicks{c: make(chan time.Time), stopped: make(chan struct{})}
}

func (m *manualTicks) tick(every time.Duration) (<-chan time.Time, func()) {
	return m.c, func() { close(m.stopped) }
}

// fire ticks once; it returns when the loop took the tick.
func (m *manualTicks) fire(t *testing.T) {
	t.Helper()
	select {
	case m.c <- time.Now():
	case <-time.After(30 * time.Second):
		t.Fatal("the duty's loop did not take the tick")
	}
}

// waitRuns waits until the duty finished n rounds.
func waitRuns(t *testing.T, p *Periodic, n uint64) Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := p.Status()
		if s.Runs >= n && !s.Running {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d rounds after 30s, want %d (%+v)", p.Name(), s.Runs, n, s)
		}
		time.Sleep(time.Millisecond)
	}
}

// goroutinesBack waits until no more goroutines run than before: a
// stopped duty leaves none behind.
func goroutinesBack(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after stop, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}
