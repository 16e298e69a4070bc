package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/store"
)

// Issue 29: behind --trusted-proxy a text/plain POST from another site's
// page, to which the proxy adds the user's X-Forwarded-User, was accepted
// for approve (200), reconcile (202) and resolve (200). Every
// state-changing route now refuses a cross-origin browser request,
// whatever authenticates it; the same request without browser headers
// (a script through the proxy) still works.
func TestCrossSiteWritesRefusedBehindTheProxy(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("h1", "timeout", `,"labels":{"risk":"high"}`)})
	roles, err := ParseRoleMapping([]string{"sre=admin"})
	if err != nil {
		t.Fatal(err)
	}
	b.srv.cfg.Proxy = &ProxyAuth{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Roles: roles,
		ApproverGroups: map[string]string{"sre": "platform-oncall"}}
	// ops-bot (an approver token) raises the request, as in
	// TestRequesterCannotApproveThroughTheAPI.
	if _, err := b.srv.runs.start("api", "ops-bot"); err != nil {
		t.Fatal(err)
	}
	b.srv.Wait()
	var list []approval.View
	_, body := b.do("GET", "/api/approvals", "viewer", "")
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list) != 1 {
		t.Fatalf("approvals: %s", body)
	}
	id := list[0].ID
	state := func() string {
		var a *store.Approval
		if err := b.store.View(context.Background(), func(tx store.Tx) (err error) { a, err = tx.Approval(id); return err }); err != nil || a == nil {
			t.Fatalf("approval %s: %v", id, err)
		}
		return a.State
	}
	post := func(path string, crossSite bool) (int, string) {
		req, err := http.NewRequest("POST", b.http.URL+path, strings.NewReader(`{"reason":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-User", "alice")
		req.Header.Set("X-Forwarded-Groups", "sre")
		req.Header.Set("Content-Type", "text/plain")
		if crossSite {
			req.Header.Set("Origin", "https://evil.example")
			req.Header.Set("Sec-Fetch-Site", "cross-site")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	for _, path := range []string{"/api/approvals/" + id + "/approve", "/api/reconcile", "/api/dead-letters/e1/resolve", "/approvals/" + id + "/approve", "/api/plans/" + id + "/start"} {
		if code, body := post(path, true); code != http.StatusForbidden {
			t.Fatalf("cross-site POST %s through the proxy: %d %s, want 403", path, code, body)
		}
	}
	if st := state(); st != store.ApprovalPending {
		t.Fatalf("the cross-site approve went through: %s", st)
	}
	// Not a browser: the proxy's user may still use the API.
	if code, body := post("/api/approvals/"+id+"/approve", false); code != http.StatusOK {
		t.Fatalf("same-origin API approve through the proxy: %d %s", code, body)
	}
}
