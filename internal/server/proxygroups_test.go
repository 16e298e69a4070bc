package server

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/store"
)

// Issue 19: sign-in by a trusted proxy maps "groups to roles and approver
// groups". zoe is in no approvers.yaml group; her SSO group sso-platform is
// mapped to platform-oncall, so through the proxy she may decide that
// group's requests; without the group, or with the same header from an
// untrusted address, she may not. Four-eyes still holds.
func TestProxyGroupsMapToApproverGroups(t *testing.T) {
	b := newAPIBundle(t, []string{line("h1", "timeout", `,"labels":{"risk":"high"}`), line("h2", "timeout", `,"labels":{"risk":"high"}`)})
	groups, err := ParseApproverGroupMapping([]string{"sso-platform=platform-oncall", "sso-pay = payments-oncall"})
	if err != nil {
		t.Fatal(err)
	}
	b.srv.cfg.Proxy = &ProxyAuth{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, ApproverGroups: groups}
	b.reconcile("operator")
	var list []store.Approval
	if code, body := b.do("GET", "/api/approvals?state=pending", "alice", ""); code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list) != 2 {
		t.Fatalf("pending approvals: %d %s", code, body)
	}
	for _, a := range list {
		if a.ApproverGroup != "platform-oncall" {
			t.Fatalf("request for %q, want platform-oncall", a.ApproverGroup)
		}
	}

	// Signed in, but in no mapped group and with no default role: refused.
	if code, _ := b.asProxy("POST", "/api/approvals/"+list[0].ID+"/approve", "zoe", "sso-pay"); code != http.StatusForbidden {
		t.Fatalf("zoe as a payments approver deciding a platform request: %d, want 403", code)
	}
	code, body := b.asProxy("POST", "/api/approvals/"+list[0].ID+"/approve", "zoe", "staff, sso-platform")
	if code != http.StatusOK || !strings.Contains(body, `"decided_by":"zoe"`) {
		t.Fatalf("zoe through the proxy in sso-platform: %d %s", code, body)
	}
	// The requester may not decide, whatever the proxy says of her groups.
	if code, body := b.asProxy("POST", "/api/approvals/"+list[1].ID+"/approve", "operator", "sso-platform"); code != http.StatusForbidden || !strings.Contains(body, "four-eyes") {
		t.Fatalf("the requester through the proxy: %d %s, want 403 four-eyes", code, body)
	}
	// The same headers from an untrusted address prove nothing.
	b.srv.cfg.Proxy.Trusted = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	if code, _ := b.asProxy("POST", "/api/approvals/"+list[1].ID+"/approve", "zoe", "sso-platform"); code != http.StatusUnauthorized {
		t.Fatalf("proxy headers from an untrusted address: %d, want 401", code)
	}
	if _, err := ParseApproverGroupMapping([]string{"sso-platform"}); err == nil {
		t.Fatal("a mapping without = was accepted")
	}
}
