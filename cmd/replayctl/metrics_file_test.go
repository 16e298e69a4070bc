package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A scheduled reconcile (cron, systemd timer) has no server to scrape: it
// writes the node_exporter textfile. The file must pass `promtool check
// metrics`, carry the run's counts, and keep counters counting across runs
// (an entry held for approval is one denial, not one per run).
func TestReconcileMetricsFile(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer target.Close()
	dir := t.TempDir()
	dlq := filepath.Join(dir, "dlq.jsonl")
	if err := os.WriteFile(dlq, []byte(strings.Join([]string{
		`{"id":"e1","topic":"tool.email.send","reason_code":"timeout","idempotency_key":"k-e1","payload":{}}`,
		`{"id":"h1","topic":"tool.email.send","reason_code":"timeout","idempotency_key":"k-h1","labels":{"risk":"high"},"payload":{}}`,
		`{"id":"p1","topic":"tool.email.send","reason_code":"schema_invalid","idempotency_key":"k-p1","payload":{}}`,
	}, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mf := filepath.Join(dir, "textfile", "replayctl.prom")
	if err := os.Mkdir(filepath.Dir(mf), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"reconcile", "--rules", "../../rules.yaml", "--policies", "../../policies", "--db", filepath.Join(dir, "replayctl.db"),
		"--source", "jsonl:" + dlq, "--target", target.URL, "--metrics-file", mf}
	want := func(run int, lines ...string) {
		t.Helper()
		data, err := os.ReadFile(mf)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		for _, l := range lines {
			if !bytes.Contains(data, []byte("\n"+l+"\n")) {
				t.Errorf("run %d: metrics file lacks %q:\n%s", run, l, data)
			}
		}
		if bytes.Contains(data, []byte("go_goroutines")) || bytes.Contains(data, []byte("_bucket{")) {
			t.Errorf("run %d: the textfile carries Go runtime metrics or histograms", run)
		}
		if promtool, err := exec.LookPath("promtool"); err == nil {
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = bytes.NewReader(data)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("run %d: promtool check metrics: %v\n%s", run, err, out)
			}
		} else if os.Getenv("CI") != "" {
			t.Error("promtool not found: CI must install it (.ci/run installs prometheus)")
		}
	}
	var out, errb bytes.Buffer
	if code := run(args, nil, &out, &errb); code != exitOK {
		t.Fatalf("first run exit %d, want %d (h1 waits for a person: not a failed run)\n%s%s", code, exitOK, out.String(), errb.String())
	}
	want(1,
		`replayctl_entries_ingested_total 3`,
		`replayctl_replays_proposed_total 2`,
		`replayctl_replays_denied_total 1`,
		`replayctl_replay_outcomes_total{outcome="succeeded"} 1`,
		`replayctl_decisions_total{action="quarantine"} 1`,
		`replayctl_reconcile_runs_total{result="succeeded"} 1`,
		`replayctl_entries{action="quarantine",class="poison",state="quarantined"} 1`,
		`replayctl_config_valid 1`,
	)
	if code := run(args, nil, &out, &errb); code != exitOK {
		t.Fatalf("second run exit %d\n%s", code, errb.String())
	}
	want(2,
		`replayctl_entries_ingested_total 3`,
		`replayctl_replays_proposed_total 2`,
		`replayctl_replays_denied_total 1`,
		`replayctl_replay_outcomes_total{outcome="succeeded"} 1`,
		`replayctl_reconcile_runs_total{result="succeeded"} 2`,
	)

	// A file that is not in the text format is an error naming it, never
	// silently reset.
	if err := os.WriteFile(mf, []byte("this is not metrics {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := run(args, nil, &out, &errb); code == exitOK || code == exitAwaiting || !strings.Contains(errb.String(), mf) {
		t.Fatalf("corrupt metrics file: exit %d, stderr %q", code, errb.String())
	}
}
