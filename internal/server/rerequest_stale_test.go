package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// TestRerequestStaleNeverDispatches: review finding 1. Re-requesting a
// stale approval is open to the approver-only role, so it must never
// reach the dispatch path. The engine's policy changes while the request
// is handled (a reload between two loads: the first load still asks for
// an approval, every later one would replay the entry automatically);
// the re-request decides once, opens a new request and sends nothing. The
// target is a real httptest server counting what it receives: zero
// requests, whichever way the decision turns out. A viewer may not ask.
func TestRerequestStaleNeverDispatches(t *testing.T) {
	relaxed := relaxedPolicyDir(t)
	var armed atomic.Bool
	var loads atomic.Int32
	f := newBrowserFixtureWith(t, func(cfg *server.Config) {
		cfg.Engine = func(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
			if armed.Load() && loads.Add(1) > 1 {
				return policy.LoadEngine(ctx, "../../rules.yaml", relaxed, 0)
			}
			return policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 0)
		}
	}, highRisk("h1"), highRisk("h2"))
	if run := f.reconcile(t, "ops-bot"); run.Report.ApprovalsOpened != 2 {
		t.Fatalf("want 2 approval requests, got %d", run.Report.ApprovalsOpened)
	}
	// h1 changed owner (still high risk); h2 is no longer high risk. Both
	// requests are stale, as approving them would have found.
	stale := map[string]string{}
	for ref, labels := range map[string]map[string]string{
		"jsonl:h1": {"risk": "high", "owner": "payments"},
		"jsonl:h2": {"owner": "payments"},
	} {
		if err := f.store.Update(context.Background(), func(tx store.Tx) error {
			er, err := tx.Entry(ref)
			if err != nil || er == nil {
				t.Fatalf("entry %s: %v", ref, err)
			}
			er.Entry.Labels = labels
			a, err := tx.Approval(er.ApprovalID)
			if err != nil || a == nil {
				t.Fatalf("approval of %s: %v", ref, err)
			}
			a.State = store.ApprovalStale
			stale[ref] = a.ID
			if err := tx.PutApproval(a); err != nil {
				return err
			}
			return tx.PutEntry(er)
		}); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(who, id string) (int, string) {
		t.Helper()
		c := formClient(t, f.http.URL, f.tokens[who])
		resp, err := c.Get(f.http.URL + "/approvals?state=stale")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := csrfField.FindSubmatch(page)
		if m == nil {
			t.Fatalf("no CSRF token on %s's page", who)
		}
		resp, err = c.PostForm(f.http.URL+"/approvals/"+id+"/rerequest", url.Values{"csrf": {string(m[1])}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		flash, _ := url.QueryUnescape(resp.Header.Get("Location"))
		return resp.StatusCode, flash
	}

	if code, _ := ask("carol", stale["jsonl:h1"]); code != http.StatusForbidden {
		t.Fatalf("a viewer re-requesting: %d, want 403", code)
	}
	if a := f.approvalRecord(t, stale["jsonl:h1"]); a.State != store.ApprovalStale {
		t.Fatalf("after a viewer's refused re-request: %s", a.State)
	}

	armed.Store(true)
	code, flash := ask("alice", stale["jsonl:h1"])
	if code != http.StatusSeeOther || !strings.Contains(flash, "asked again as apr_") {
		t.Fatalf("alice (approver) re-requesting h1: %d %q", code, flash)
	}
	if n := f.deliveries("key-h1"); n != 0 {
		t.Fatalf("an approver's re-request sent h1 to the target %d times", n)
	}
	if n := loads.Load(); n != 1 {
		t.Fatalf("the engine was loaded %d times for one re-request, want 1", n)
	}
	if st := f.entryStatus(t, "jsonl:h1"); st != store.StatusAwaitingApproval {
		t.Fatalf("h1 after the re-request: %s", st)
	}

	// Now the engine would replay h2 automatically, and h2 no longer
	// needs an approval under either policy: refused, nothing sent.
	code, flash = ask("alice", stale["jsonl:h2"])
	if code != http.StatusSeeOther || !strings.Contains(flash, "not done") || !strings.Contains(flash, "not an approval") {
		t.Fatalf("re-requesting h2: %d %q", code, flash)
	}
	if n := f.deliveries("key-h2"); n != 0 {
		t.Fatalf("a refused re-request sent h2 to the target %d times", n)
	}
	if st := f.entryStatus(t, "jsonl:h2"); st != store.StatusAwaitingApproval {
		t.Fatalf("h2 after a refused re-request: %s, want it left as it was", st)
	}
}

// relaxedPolicyDir is the bundled policy with its high-risk rule never
// matching (policies/replayctl.rego: `high_risk if ...`), so a high-risk
// entry is replayed without an approval.
func relaxedPolicyDir(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../policies/replayctl.rego")
	if err != nil {
		t.Fatal(err)
	}
	const rule = `high_risk if lower(input.entry.labels.risk) == "high"`
	if !strings.Contains(string(b), rule) {
		t.Fatalf("policies/replayctl.rego no longer has %q", rule)
	}
	dir := t.TempDir()
	text := strings.Replace(string(b), rule, `high_risk if lower(input.entry.labels.risk) == "never-high"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "replayctl.rego"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// formClient is a browser without JavaScript, logged in with secret: it
// keeps cookies and does not follow redirects (the flash is in Location).
func formClient(t *testing.T, base, secret string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(page)
	if m == nil {
		t.Fatal("login form without its CSRF field")
	}
	resp, err = c.PostForm(base+"/login", url.Values{"token": {secret}, "csrf": {string(m[1])}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	return c
}
