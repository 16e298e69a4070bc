package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Every log line of a run carries its run id (so one run's story can be
// pulled out of a shared log), and a SIGTERM during a run logs no error.
func TestRunLogsCarryRunIDAndShutdownLogsNoError(t *testing.T) {
	var entries []string
	for i := range 40 {
		entries = append(entries, line(fmt.Sprintf("e%02d", i), "timeout", ""))
	}
	b := newAPIBundle(t, entries)
	var logs lockedBuffer
	b.srv.cfg.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// A run stopped by a shutdown mid-way, then a complete one.
	b.mu.Lock()
	b.hang = 30 * time.Millisecond
	b.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	b.srv.SetBase(ctx)
	if _, err := b.srv.runs.start("api", "operator"); err != nil {
		t.Fatal(err)
	}
	// Wait (on the sink, not the clock) until dispatches are in flight.
	for range 1000 {
		b.mu.Lock()
		n := len(b.got)
		b.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	b.srv.Wait()
	b.mu.Lock()
	b.hang = 0
	b.mu.Unlock()
	b.srv.SetBase(context.Background())
	b.reconcile("operator")

	out := strings.TrimSpace(logs.String())
	if out == "" {
		t.Fatal("no log lines")
	}
	runs := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("not a JSON log line: %q", l)
		}
		id, _ := rec["run"].(string)
		if id == "" {
			t.Errorf("log line without a run id: %s", l)
		}
		runs[id] = true
		if rec["level"] == "ERROR" {
			t.Errorf("a clean shutdown logged an error: %s", l)
		}
	}
	if len(runs) != 2 {
		t.Errorf("log lines name %d runs, want 2:\n%s", len(runs), out)
	}
}
