package server

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// browser is a cookie-keeping HTTP client that does not follow redirects,
// so each step's answer can be checked.
type browser struct {
	t    *testing.T
	c    *http.Client
	base string
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (b *browser) get(path string) (int, string, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

var loginCSRFRe = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// login opens the login page (as a browser does) and posts the form.
func (b *browser) login(token, next string) (int, string, string) {
	b.t.Helper()
	_, _, page := b.get("/login")
	m := loginCSRFRe.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatal("login form without its CSRF field")
	}
	return b.post("/login", url.Values{"token": {token}, "next": {next}, "csrf": {m[1]}})
}

func (b *browser) post(path string, form url.Values) (int, string, string) {
	b.t.Helper()
	resp, err := b.c.PostForm(b.base+path, form)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func TestWebUIApprovalFlowWithoutJavaScript(t *testing.T) {
	b := newAPIBundle(t, []string{line("h1", "timeout", `,"labels":{"risk":"high"}`)})
	b.reconcile("operator")
	ui := newBrowser(t, b.http.URL)

	// Not logged in: sent to the login page.
	code, loc, _ := ui.get("/approvals")
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/login") {
		t.Fatalf("anonymous /approvals: %d %s", code, loc)
	}
	if code, _, _ := ui.login("rpl_wrong", ""); code != http.StatusUnauthorized {
		t.Fatalf("bad token login: %d", code)
	}
	// A login form posted from elsewhere (no login cookie) is refused.
	if code, _, _ := newBrowser(t, b.http.URL).post("/login", url.Values{"token": {b.tokens["alice"]}, "csrf": {"x"}}); code != http.StatusForbidden {
		t.Fatalf("cross-site login: %d", code)
	}
	code, loc, _ = ui.login(b.tokens["alice"], "/approvals")
	if code != http.StatusSeeOther || loc != "/approvals" {
		t.Fatalf("login: %d %s", code, loc)
	}
	code, _, page := ui.get("/approvals")
	if code != 200 || !strings.Contains(page, "jsonl:h1") || !strings.Contains(page, `class="approve"`) {
		t.Fatalf("approvals page: %d\n%s", code, page)
	}
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token in the form")
	}
	id := regexp.MustCompile(`<article class="approval" id="(apr_[0-9a-f]+)"`).FindStringSubmatch(page)[1]

	// A forged form (no or wrong CSRF token) is refused and changes nothing.
	if code, _, _ := ui.post("/approvals/"+id+"/approve", url.Values{}); code != http.StatusForbidden {
		t.Fatalf("approve without CSRF: %d", code)
	}
	if code, _, _ := ui.post("/approvals/"+id+"/approve", url.Values{"csrf": {strings.Repeat("0", 64)}}); code != http.StatusForbidden {
		t.Fatalf("approve with a wrong CSRF token: %d", code)
	}
	code, loc, _ = ui.post("/approvals/"+id+"/approve", url.Values{"csrf": {m[1]}, "reason": {"checked the charge"}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "approved+by+alice") {
		t.Fatalf("approve: %d %s", code, loc)
	}
	_, _, entry := ui.get("/entries/" + url.PathEscape("jsonl:h1"))
	if !strings.Contains(entry, `id="approval"`) || !strings.Contains(entry, "approved") || !strings.Contains(entry, "by alice") {
		t.Fatalf("entry page does not show the approval:\n%s", entry)
	}
	if !strings.Contains(entry, "approval approved") {
		t.Fatalf("entry page's story lacks the approval:\n%s", entry)
	}

	// The audit page verifies the chain.
	if _, _, audit := ui.get("/audit"); !strings.Contains(audit, "chain verified") {
		t.Fatalf("audit page:\n%s", audit)
	}
}

func TestWebUIRolesAndBulkPreview(t *testing.T) {
	var entries []string
	for _, id := range []string{"p1", "p2", "p3"} {
		entries = append(entries, line(id, "schema_invalid", ""))
	}
	b := newAPIBundle(t, entries)
	b.reconcile("operator")

	viewer := newBrowser(t, b.http.URL)
	viewer.login(b.tokens["viewer"], "")
	_, _, page := viewer.get("/approvals")
	if strings.Contains(page, `class="approve"`) {
		t.Fatal("a viewer is offered approve buttons")
	}
	_, _, bulk := viewer.get("/bulk?class=poison")
	if !strings.Contains(bulk, `<span id="matched">3</span>`) || !strings.Contains(bulk, "quarantined") {
		t.Fatalf("bulk preview:\n%s", bulk)
	}
	m := csrfRe.FindStringSubmatch(bulk)
	if code, _, _ := viewer.post("/bulk", url.Values{"csrf": {m[1]}, "class": {"poison"}}); code != http.StatusForbidden {
		t.Fatalf("viewer executing a bulk replay: %d", code)
	}

	op := newBrowser(t, b.http.URL)
	op.login(b.tokens["operator"], "")
	_, _, bulk = op.get("/bulk?class=poison")
	m = csrfRe.FindStringSubmatch(bulk)
	// A form with no filter (only a cap) never means "everything": refused
	// unless the "all entries" box is ticked (issue 17's mass-action typo).
	code, loc, _ := op.post("/bulk", url.Values{"csrf": {m[1]}, "max": {"10"}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "not+started") || !strings.Contains(loc, "no+filter") {
		t.Fatalf("bulk replay with no filter: %d %s", code, loc)
	}
	if _, _, page := op.get("/bulk?reason_code=schema_invalid"); !strings.Contains(page, `<span id="matched">3</span>`) {
		t.Fatalf("reason_code filter on the bulk page:\n%s", page)
	}
	if _, _, page := op.get("/bulk?all=1"); !strings.Contains(page, `<span id="matched">3</span>`) || !strings.Contains(page, `name="all" value="1" checked`) {
		t.Fatalf("all entries on the bulk page:\n%s", page)
	}
	code, loc, _ = op.post("/bulk", url.Values{"csrf": {m[1]}, "class": {"poison"}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "started") {
		t.Fatalf("operator bulk replay: %d %s", code, loc)
	}
	b.srv.Wait()
}

func TestLoginNeverRedirectsOffSite(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	for _, next := range []string{`/\evil.example`, "/\t/evil.example", "//evil.example", "https://evil.example", "/\n/evil.example"} {
		ui := newBrowser(t, b.http.URL)
		code, loc, _ := ui.login(b.tokens["viewer"], next)
		if code != http.StatusSeeOther || loc != "/" {
			t.Errorf("next=%q: %d Location %q, want / (an open redirect)", next, code, loc)
		}
	}
	ui := newBrowser(t, b.http.URL)
	if _, loc, _ := ui.login(b.tokens["viewer"], "/audit"); loc != "/audit" {
		t.Errorf("a local next was dropped: %q", loc)
	}
}

// TestUIReplayCost: the entry page's cost of one more replay names the
// last one as such.
func TestUIReplayCost(t *testing.T) {
	for _, c := range []struct {
		used, max int
		want      string
	}{{0, 3, "uses replay 1 of 3"}, {1, 3, "uses replay 2 of 3"}, {2, 3, "uses the last of 3 replays"}, {0, 1, "uses its only replay"}, {0, 0, ""}} {
		if got := replayCost(c.used, c.max); got != c.want {
			t.Errorf("replayCost(%d, %d) = %q, want %q", c.used, c.max, got, c.want)
		}
	}
}
