package server

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/triage"
)

// Issue 29: anonymous /readyz compiled the rules and policies on every
// call, outside the anonymous cap: 16 clients drove serve to 1.6 cores.
// It now reads what the last load left and loads again only when a file
// changed; and it waits on the anonymous slots like any anonymous request.
// (Compilations are counted, not timed.)
func TestReadyzLoadsOnlyWhenTheFilesChange(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	good, err := os.ReadFile("../../rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rules, good, 0o644); err != nil {
		t.Fatal(err)
	}
	var loads atomic.Int32
	b := newAPIBundle(t, []string{line("e1", "timeout", "")}, func(c *Config) {
		c.MaxUnauthenticated = 2
		c.ConfigFiles = []string{rules, "../../policies"}
		c.Engine = func(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
			loads.Add(1)
			return policy.LoadEngine(ctx, rules, "../../policies", 0)
		}
	})
	for range 50 {
		if code, body := b.do("GET", "/readyz", "", ""); code != http.StatusOK || !strings.Contains(body, `"config":"valid"`) {
			t.Fatalf("/readyz: %d %s", code, body)
		}
	}
	if n := loads.Load(); n != 1 {
		t.Fatalf("50 /readyz compiled the configuration %d times, want once", n)
	}
	// A run's load is the verdict too: no load for the next /readyz.
	b.reconcile("operator")
	before := loads.Load()
	b.do("GET", "/readyz", "", "")
	if n := loads.Load(); n != before {
		t.Fatalf("/readyz after a run loaded again (%d -> %d)", before, n)
	}
	// A broken edit is seen by the next /readyz, once.
	if err := os.WriteFile(rules, []byte("rules:\n  - name: broken\n    match: {reason_code: [timeout\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Minute) // an mtime the edit surely moved
	if err := os.Chtimes(rules, future, future); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if code, body := b.do("GET", "/readyz", "", ""); code != http.StatusOK || !strings.Contains(body, `"config":"invalid: runs refused`) {
			t.Fatalf("/readyz after a broken edit: %d %s", code, body)
		}
	}
	if n := loads.Load(); n != before+1 {
		t.Fatalf("after one edit /readyz loaded %d times, want once", n-before)
	}

	// Counted under the anonymous cap: with both slots held, it waits its
	// turn (503) like any anonymous request.
	addr := b.http.Listener.Addr().String()
	slowLogin(t, addr)
	slowLogin(t, addr)
	if code, body := b.do("GET", "/readyz", "", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the anonymous slots full: %d %s, want 503", code, body)
	}
}
