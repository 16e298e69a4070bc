package server

import (
	"io"
	"net/http"
	"net/netip"
	"testing"
)

func (b *apiBundle) asProxy(method, path, usr, groups string) (int, string) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.http.URL+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-User", usr)
	req.Header.Set("X-Forwarded-Groups", groups)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// oauth2-proxy's headers (X-Forwarded-User, X-Forwarded-Groups) sign a
// person in only when the connection comes from a configured proxy address;
// from anywhere else they are ignored, or anyone could claim to be admin.
func TestProxyHeadersTrustedOnlyFromProxyAddresses(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	roles, err := ParseRoleMapping([]string{"sre=operator", "viewers=viewer"})
	if err != nil {
		t.Fatal(err)
	}

	// The test client connects from 127.0.0.1, which is not a proxy here.
	b.srv.cfg.Proxy = &ProxyAuth{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Roles: roles}
	if code, body := b.asProxy("GET", "/api/dead-letters", "mallory", "sre"); code != http.StatusUnauthorized {
		t.Fatalf("headers from an untrusted address: %d %s, want 401", code, body)
	}

	b.srv.cfg.Proxy = &ProxyAuth{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Roles: roles}
	if code, body := b.asProxy("GET", "/api/dead-letters", "carol", "viewers"); code != http.StatusOK {
		t.Fatalf("viewer through the proxy: %d %s", code, body)
	}
	if code, _ := b.asProxy("POST", "/api/reconcile", "carol", "viewers"); code != http.StatusForbidden {
		t.Fatalf("viewer starting a run through the proxy: %d, want 403", code)
	}
	// The strongest mapped group wins; the user is who the audit names.
	if code, body := b.asProxy("POST", "/api/reconcile", "dave", "viewers, sre"); code != http.StatusAccepted {
		t.Fatalf("operator through the proxy: %d %s", code, body)
	}
	b.srv.Wait()
	if code, _ := b.asProxy("GET", "/api/dead-letters", "erin", "unmapped"); code != http.StatusUnauthorized {
		t.Fatalf("user with no mapped group and no default role: %d, want 401", code)
	}
	if code, _ := b.asProxy("GET", "/api/dead-letters", "", "sre"); code != http.StatusUnauthorized {
		t.Fatalf("no user header: %d, want 401", code)
	}
	// Tokens keep working for machines alongside the proxy.
	if code, _ := b.do("GET", "/api/dead-letters", "viewer", ""); code != http.StatusOK {
		t.Fatalf("bearer token with proxy auth on: %d", code)
	}
	if _, err := ParseRoleMapping([]string{"sre=root"}); err == nil {
		t.Fatal("unknown role accepted")
	}
}
