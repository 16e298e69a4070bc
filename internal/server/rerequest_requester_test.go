package server

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/approval"
)

// Issue 29: when serve's scheduler re-requested an expired approval, the
// replacement was "requested by replayctl-scheduler", so the person whose
// run raised the original approved it; and four-eyes took "OPS-BOT" from
// the proxy for someone else than the "ops-bot" token. The replacement
// keeps its requester, compared case-folded and trimmed.
func TestSchedulerRerequestKeepsTheRequester(t *testing.T) {
	var mu sync.Mutex
	offset := time.Duration(0)
	b := newAPIBundle(t, []string{line("h1", "timeout", `,"labels":{"risk":"high"}`)}, func(c *Config) {
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(offset) }
	})
	if _, err := b.srv.runs.start("api", "ops-bot"); err != nil {
		t.Fatal(err)
	}
	b.srv.Wait()
	mu.Lock()
	offset = 2 * time.Hour // past the hour's expiry
	mu.Unlock()
	if _, err := b.srv.runs.start("schedule", "replayctl-scheduler"); err != nil {
		t.Fatal(err)
	}
	b.srv.Wait()
	var list []approval.View
	_, body := b.do("GET", "/api/approvals?state=pending", "viewer", "")
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list) != 1 {
		t.Fatalf("pending after the scheduler asked again: %s", body)
	}
	if list[0].RequestedBy != "ops-bot" {
		t.Fatalf("the replacement is requested by %q, want ops-bot", list[0].RequestedBy)
	}
	path := "/api/approvals/" + list[0].ID + "/approve"
	if code, body := b.do("POST", path, "ops-bot", ""); code != http.StatusForbidden || !strings.Contains(body, "four-eyes") {
		t.Fatalf("ops-bot approving the replacement of its own request: %d %s", code, body)
	}
	b.srv.cfg.Proxy = &ProxyAuth{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		ApproverGroups: map[string]string{"oncall": "platform-oncall"}}
	req, _ := http.NewRequest("POST", b.http.URL+path, nil)
	req.Header.Set("X-Forwarded-User", "OPS-BOT")
	req.Header.Set("X-Forwarded-Groups", "oncall")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("OPS-BOT through the proxy approving ops-bot's request: %d, want 403", resp.StatusCode)
	}
	if code, body := b.do("POST", path, "alice", ""); code != http.StatusOK {
		t.Fatalf("alice approving: %d %s", code, body)
	}
}
