package server

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/replayctl/replayctl/internal/triage"
)

// countLoads counts how often the server compiles rules and policies.
func countLoads(n *atomic.Int64) func(*Config) {
	return func(c *Config) {
		load := c.Engine
		c.Engine = func(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
			n.Add(1)
			return load(ctx)
		}
	}
}

// A run started through the API compiles the configuration once: the
// check that refuses an invalid one (422) hands what it loaded to the run,
// which loaded it a second time.
func TestAPIRunCompilesTheConfigurationOnce(t *testing.T) {
	var loads atomic.Int64
	b := newAPIBundle(t, []string{line("e1", "timeout", "")}, countLoads(&loads))
	if run := b.reconcile("operator"); run.State != "succeeded" {
		t.Fatalf("run %s", run.State)
	}
	if n := loads.Load(); n != 1 {
		t.Fatalf("a run compiled rules and policies %d times, want once", n)
	}
}

// Approving several requests in one form compiles the configuration once
// for all of them, not once per request; each is still its own decision.
func TestMultiApproveCompilesTheConfigurationOnce(t *testing.T) {
	var loads atomic.Int64
	b := newAPIBundle(t, []string{line("h1", "timeout", `,"labels":{"risk":"high"}`), line("h2", "timeout", `,"labels":{"risk":"high"}`),
		line("h3", "timeout", `,"labels":{"risk":"high"}`)}, countLoads(&loads))
	b.reconcile("operator")
	ui := newBrowser(t, b.http.URL)
	if code, _, _ := ui.login(b.tokens["alice"], "/approvals"); code != http.StatusSeeOther {
		t.Fatalf("login: %d", code)
	}
	_, _, page := ui.get("/approvals")
	m := csrfRe.FindStringSubmatch(page)
	ids := regexp.MustCompile(`<article class="approval" id="(apr_[0-9a-f]+)"`).FindAllStringSubmatch(page, -1)
	if m == nil || len(ids) != 3 {
		t.Fatalf("approvals page: %d requests\n%s", len(ids), page)
	}
	form := url.Values{"csrf": {m[1]}, "decision": {"approve"}, "reason": {"checked"}}
	for _, id := range ids {
		form.Add("id", id[1])
	}
	before := loads.Load()
	code, loc, _ := ui.post("/approvals/decide", form)
	if code != http.StatusSeeOther || strings.Count(loc, "approved+by+alice") != 3 {
		t.Fatalf("decide: %d %s", code, loc)
	}
	if n := loads.Load() - before; n != 1 {
		t.Fatalf("approving 3 requests compiled rules and policies %d times, want once", n)
	}
}
