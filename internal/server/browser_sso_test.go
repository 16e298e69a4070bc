package server_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/store"
)

// ssoProxy is an oauth2-proxy stand-in: a real reverse proxy in front of
// the server that signs every request in as user (as the real one does
// once its own cookie is valid, whatever page made the request), and
// records the server's status per path.
type ssoProxy struct {
	*httptest.Server
	mu     sync.Mutex
	status map[string][]int
}

func newSSOProxy(t *testing.T, upstream, user, groups string) *ssoProxy {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &ssoProxy{status: map[string][]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host // as oauth2-proxy passes it on
			pr.Out.Header.Set("X-Forwarded-User", user)
			pr.Out.Header.Set("X-Forwarded-Groups", groups)
		},
		ModifyResponse: func(resp *http.Response) error {
			p.mu.Lock()
			p.status[resp.Request.URL.Path] = append(p.status[resp.Request.URL.Path], resp.StatusCode)
			p.mu.Unlock()
			return nil
		},
	}
	p.Server = httptest.NewServer(rp)
	t.Cleanup(p.Close)
	return p
}

func (p *ssoProxy) statuses(path string) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.status[path]...)
}

// Issue 29: an SSO user (signed in by the trusted proxy) got an empty CSRF
// token, so their Approve got 403, though the README says proxy users
// decide in the console; and a cross-site text/plain POST, to which the
// proxy adds X-Forwarded-User, approved as them. Now the SSO user approves
// in the console, and the same approve from another site's page is refused.
func TestBrowserSSOApprove(t *testing.T) {
	chromium := requireChromium(t)
	f := newBrowserFixtureWith(t, func(c *server.Config) {
		c.Proxy = &server.ProxyAuth{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
			ApproverGroups: map[string]string{"sso-oncall": "platform-oncall"}}
	}, highRisk("h1"), highRisk("h2"))
	if run := f.reconcile(t, "ops-bot"); run.Report.ApprovalsOpened != 2 {
		t.Fatalf("want 2 approval requests, got %d", run.Report.ApprovalsOpened)
	}
	proxy := newSSOProxy(t, f.http.URL, "dana", "sso-oncall")
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 90*time.Second)}
	b.viewport(1280, 800)
	b.navigate(proxy.URL + "/approvals")
	ids := strings.Fields(b.eval(`Array.from(document.querySelectorAll("#approvals article")).map(a => a.id).join(" ")`))
	if len(ids) != 2 {
		b.fatalf("want 2 requests in dana's queue, got %v", ids)
	}
	b.submit(chromedp.Click(chromedp.CSS("#approve-" + ids[0])))
	if flash := b.text("#flash"); !strings.Contains(flash, ids[0]+" approved by dana") {
		b.fatalf("SSO approve: flash %q", flash)
	}
	if a := f.approvalRecord(t, ids[0]); a.State != store.ApprovalApproved || a.DecidedBy != "dana" {
		t.Fatalf("%s: %s by %q, want approved by dana", ids[0], a.State, a.DecidedBy)
	}

	// Another site (localhost is another site than 127.0.0.1) posts
	// text/plain to the proxy, which adds dana's identity.
	path := "/api/approvals/" + ids[1] + "/approve"
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>cats</title><script>
		fetch(` + "`" + proxy.URL + path + "`" + `, {method: "POST", mode: "no-cors", credentials: "include",
		  headers: {"Content-Type": "text/plain"}, body: '{"reason":"free cats"}'})
		  .then(() => { document.title = "sent" }, () => { document.title = "failed" });
		</script>`))
	}))
	defer evil.Close()
	b.navigate(strings.Replace(evil.URL, "127.0.0.1", "localhost", 1))
	if !b.waitFor(`document.title === "sent" || document.title === "failed"`, 10*time.Second) {
		b.fatalf("the cross-site page's request did not finish")
	}
	got := proxy.statuses(path)
	if len(got) != 1 || got[0] != http.StatusForbidden {
		t.Fatalf("cross-site POST through the proxy: server answered %v, want one 403", got)
	}
	if a := f.approvalRecord(t, ids[1]); a.State != store.ApprovalPending {
		t.Fatalf("the cross-site approve went through: %s by %q", a.State, a.DecidedBy)
	}
}
