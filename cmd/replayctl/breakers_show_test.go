package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/replay"
)

// Issue 15: a retry's due time shows in `dlq show`, and `stats` read from
// the state file says breakers are kept per serve process rather than
// printing none as if all were closed.
func TestShowNextAttemptAndStatsBreakersScope(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "replayctl.db")
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	src := filepath.Join(dir, "dlq.jsonl")
	if err := os.WriteFile(src, []byte(`{"id":"e1","topic":"tool.email.send","reason_code":"timeout","idempotency_key":"k1","payload":{}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--rules", "../../rules.yaml", "--policies", "../../policies", "--db", db}
	runCLI(t, append([]string{"reconcile", "--source", "jsonl:" + src, "--target", down.URL, "--as", "ops-bot"}, common...)...)
	out, code := runCLI(t, "dlq", "show", "jsonl:e1", "--db", db)
	if code != exitOK || !regexp.MustCompile(`(?m)^next       \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(a retry's due time`).MatchString(out) {
		t.Fatalf("dlq show: exit %d\n%s", code, out)
	}
	out, code = runCLI(t, "stats", "--db", db)
	if code != exitOK || !strings.Contains(out, "breakers: per serve process") {
		t.Fatalf("stats: exit %d\n%s", code, out)
	}
}

// Against a serve, stats lists each target's breaker and when an open
// one lets its next trial through.
func TestPrintBreakersServing(t *testing.T) {
	until := time.Date(2026, 11, 1, 9, 1, 0, 0, time.UTC)
	var b bytes.Buffer
	printBreakers(&b, []replay.BreakerState{{Target: "orders", State: replay.BreakerOpen, Until: until, Failures: 5},
		{Target: "sink", State: replay.BreakerClosed}}, true)
	want := "breakers:\n  orders               open      5 consecutive failure(s), next trial at 2026-11-01T09:01:00Z\n  sink                 closed    0 consecutive failure(s)\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	printBreakers(&b, nil, true)
	if !strings.Contains(b.String(), "none tripped") {
		t.Fatalf("serving, no breakers: %q", b.String())
	}
}
