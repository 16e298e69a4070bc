package server

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/triage"
)

// A broken rules.yaml deployed to a running server: the UI, the API and the
// approval queue stay up (and /readyz stays 200, so Kubernetes keeps the pod
// in the Service), new runs are refused with the error, and
// replayctl_config_valid is 0 until the file is fixed.
func TestBrokenRulesKeepServingAndRefuseRuns(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("h1", "timeout", `,"labels":{"risk":"high"}`)})
	b.reconcile("operator") // h1 now waits for approval

	good, err := os.ReadFile("../../rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("rules:\n  - name: broken\n    match: {reason_code: [timeout\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.srv.cfg.Engine = func(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
		return policy.LoadEngine(ctx, rules, "../../policies", 0)
	}
	b.srv.cfg.ConfigFiles = []string{rules, "../../policies"}

	code, body := b.do("GET", "/readyz", "", "")
	if code != http.StatusOK || !strings.Contains(body, `"config":"invalid: runs refused`) || !strings.Contains(body, "rules.yaml") {
		t.Fatalf("/readyz = %d %s; want 200 naming the invalid rules file", code, body)
	}
	if m := scrape(t, b); !strings.Contains(m, "replayctl_config_valid 0\n") {
		t.Fatal("replayctl_config_valid is not 0 with a broken rules.yaml")
	}
	code, body = b.do("POST", "/api/reconcile", "operator", "")
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "invalid_configuration") || !strings.Contains(body, "rules.yaml") {
		t.Fatalf("start run = %d %s; want 422 invalid_configuration naming the file", code, body)
	}
	for _, path := range []string{"/api/dead-letters", "/api/approvals", "/api/audit"} {
		if code, body := b.do("GET", path, "viewer", ""); code != http.StatusOK {
			t.Errorf("GET %s = %d %s with a broken rules.yaml; want 200", path, code, body)
		}
	}
	if code, _ := b.do("GET", "/login", "", ""); code != http.StatusOK {
		t.Errorf("UI login page = %d with a broken rules.yaml", code)
	}
	code, body = b.do("GET", "/api/approvals", "viewer", "")
	if !strings.Contains(body, "h1") {
		t.Errorf("approval queue lost h1: %d %s", code, body)
	}

	// Fixed: the next check sets the metric back and runs start again.
	if err := os.WriteFile(rules, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if run := b.reconcile("operator"); run.State != "succeeded" {
		t.Fatalf("run after the fix: %+v", run)
	}
	if m := scrape(t, b); !strings.Contains(m, "replayctl_config_valid 1\n") {
		t.Fatal("replayctl_config_valid did not return to 1 after the fix")
	}
}
