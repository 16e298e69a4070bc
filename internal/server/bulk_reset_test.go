package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/triage"
)

// Issue 15: POST /api/dead-letters/replay takes "reset_budget" (operator
// role, a reason required): entries whose replays failed during an outage
// are re-armed and replayed; the preview counts them first.
func TestBulkReplayResetBudgetOverAPI(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	var sent atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		if broken.Load() {
			w.WriteHeader(http.StatusBadRequest) // definite failure
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(target.Close)
	b := newAPIBundle(t, []string{line("t1", "timeout", ""), line("t2", "timeout", "")}, func(c *Config) {
		c.Router = func(rules *triage.Rules) replay.Router {
			return replay.NewRulesRouter(rules, &replay.Route{Name: "t", Dispatcher: replay.NewHTTPTarget(target.URL, "", 2*time.Second, nil)})
		}
	})
	b.reconcile("operator")
	if sent.Load() != 2 {
		t.Fatalf("setup: %d sent", sent.Load())
	}
	broken.Store(false)

	body := `{"filter":{"reason_code":["timeout"]},"reset_budget":true,"reason":"fixed in INC-7"}`
	for _, c := range []struct {
		who, body string
		code      int
	}{
		{"viewer", body, http.StatusForbidden},
		{"operator", `{"filter":{"reason_code":["timeout"]},"reset_budget":true}`, http.StatusBadRequest},
	} {
		if code, out := b.do("POST", "/api/dead-letters/replay", c.who, c.body); code != c.code {
			t.Errorf("%s %s: %d %s, want %d", c.who, c.body, code, out, c.code)
		}
	}
	code, out := b.do("POST", "/api/dead-letters/replay?preview=true", "operator", body)
	if code != http.StatusOK || !strings.Contains(out, `"reset_budget":true`) || !strings.Contains(out, `"rearm":2`) || !strings.Contains(out, `"would":2`) {
		t.Fatalf("preview: %d %s", code, out)
	}
	code, out = b.do("POST", "/api/dead-letters/replay", "operator", body)
	if code != http.StatusAccepted {
		t.Fatalf("execute: %d %s", code, out)
	}
	b.srv.Wait()
	if sent.Load() != 4 {
		t.Fatalf("%d sent, want 2 more", sent.Load())
	}
	if _, out := b.do("GET", "/api/dead-letters?state=replayed", "viewer", ""); !strings.Contains(out, `"total":2`) {
		t.Fatalf("after: %s", out)
	}
}
