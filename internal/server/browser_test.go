package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/store"
)

// TestBrowserApprovesARequest drives the web UI in headless Chromium: an
// approver logs in with her token, approves a pending request from the
// approvals page, and the entry's page shows the approval and its audit
// story. A forged form (no or a wrong CSRF token) sent with her session
// cookie is refused and changes nothing. Afterwards the next reconcile
// replays the approved entry exactly once.
func TestBrowserApprovesARequest(t *testing.T) {
	chromium := requireChromium(t)
	began := time.Now()

	// A high-risk transient entry: the bundled policy makes it
	// require_approval by platform-oncall.
	f := newBrowserFixture(t, `{"id":"h1","topic":"tool.email.send","reason_code":"timeout","attempts":3,`+
		`"idempotency_key":"key-h1","labels":{"risk":"high"},"payload":{"to":"h1@example.com"}}`)
	run := f.reconcile(t, "ops-bot")
	if run.Report == nil || run.Report.ApprovalsOpened != 1 {
		t.Fatalf("the first reconcile should open one approval request: %+v", run.Report)
	}
	if n := f.deliveries("key-h1"); n != 0 {
		t.Fatalf("a require_approval entry was replayed %d times before approval", n)
	}
	code, body := f.api(t, http.MethodGet, "/api/approvals?state=pending", "alice")
	var pending []approval.View
	if err := json.Unmarshal(body, &pending); code != http.StatusOK || err != nil || len(pending) != 1 {
		t.Fatalf("GET /api/approvals?state=pending: %d %s (%v)", code, body, err)
	}
	req := pending[0]
	if req.EntryRef != "jsonl:h1" || req.ApproverGroup != "platform-oncall" || req.RequestedBy != "ops-bot" {
		t.Fatalf("unexpected request: %+v", req.Approval)
	}
	id, ref := req.ID, req.EntryRef
	base := f.http.URL

	ctx := startBrowser(t, chromium, 60*time.Second)
	b := &browserTab{t: t, ctx: ctx}

	// Not logged in: /approvals sends the browser to the login form,
	// which remembers where to go next.
	b.navigate(base + "/approvals")
	if loc := b.location(); loc != base+"/login?next=%2Fapprovals" {
		b.fatalf("anonymous /approvals landed on %s, want the login page", loc)
	}
	if next := b.value(`input[type="hidden"][name="next"]`); next != "/approvals" {
		b.fatalf("login form's next = %q, want /approvals", next)
	}

	// Log in as alice.
	b.do(chromedp.SendKeys(chromedp.CSS("input#token"), f.tokens["alice"]))
	b.submit(chromedp.Click(chromedp.CSS("button#login")))
	if loc := b.location(); loc != base+"/approvals" {
		b.fatalf("after login the browser is on %s, want %s/approvals", loc, base)
	}
	if user := b.text("header span"); user != "alice (approver)" {
		b.fatalf("header shows %q, want alice (approver)", user)
	}

	// The session cookie is HttpOnly (page scripts cannot read it) and
	// SameSite=Strict.
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
	if err != nil {
		b.fatalf("get cookies: %v", err)
	}
	var session *network.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == "replayctl_session" {
			session = c
		}
	}
	if session == nil {
		b.fatalf("no replayctl_session cookie after login; cookies: %+v", cookies.Cookies)
	}
	if !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict {
		b.fatalf("session cookie: HttpOnly %v SameSite %q, want HttpOnly and Strict", session.HTTPOnly, session.SameSite)
	}
	if js := b.eval(`document.cookie`); strings.Contains(js, "replayctl_session") {
		b.fatalf("page script can read the session cookie: %q", js)
	}

	// The pending request's row.
	row := `#approvals article[id="` + id + `"]`
	if !b.exists(row) {
		b.fatalf("no row %s on the approvals page", row)
	}
	if text := b.text(row); !strings.Contains(text, ref) || !strings.Contains(text, "pending") || !strings.Contains(text, "platform-oncall") {
		b.fatalf("row for %s reads %q, want the entry %s, pending, platform-oncall", id, text, ref)
	}

	// CSRF, outside the browser: a form posted with alice's own session
	// cookie but without the page's CSRF token is refused (403) and the
	// request stays pending. One of the tokens tried is a real one, taken
	// from another user's session: tokens are bound to their session.
	otherCSRF := csrfOfAnotherSession(t, base, f.tokens["carol"])
	for _, tc := range []struct {
		name string
		form url.Values
	}{
		{"no csrf field", url.Values{"reason": {"forged"}}},
		{"empty csrf", url.Values{"reason": {"forged"}, "csrf": {""}}},
		{"wrong csrf", url.Values{"reason": {"forged"}, "csrf": {strings.Repeat("0", 64)}}},
		{"another session's csrf", url.Values{"reason": {"forged"}, "csrf": {otherCSRF}}},
	} {
		code, body := postFormWithCookie(t, base+"/approvals/"+id+"/reject", session, tc.form)
		if code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Errorf("reject with %s: %d %q, want 403 for the CSRF token", tc.name, code, body)
		}
	}
	if a := f.approvalRecord(t, id); a.State != store.ApprovalPending || a.DecidedBy != "" || a.Reason != "" {
		t.Fatalf("forged forms changed the request: state %s by %q (%q)", a.State, a.DecidedBy, a.Reason)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Approve in the browser, with a reason.
	form := row + ` form[action="/approvals/` + id + `/approve"]`
	const reason = "checked the charge with the customer"
	b.do(chromedp.SendKeys(chromedp.CSS(form+` input[name="reason"]`), reason))
	b.submit(chromedp.Click(chromedp.CSS(form + ` button.approve`)))
	if loc := b.location(); !strings.HasPrefix(loc, base+"/approvals?flash=") {
		b.fatalf("after approving the browser is on %s, want /approvals?flash=...", loc)
	}
	if !b.exists("p#flash") {
		b.fatalf("no p#flash after approving")
	}
	if flash := b.text("p#flash"); !strings.Contains(flash, id) || !strings.Contains(flash, "approved by alice") {
		b.fatalf("flash reads %q, want %q", flash, id+" approved by alice")
	}
	if b.exists(row) {
		b.fatalf("the approved request is still listed as pending")
	}

	// The entry's page shows the approval and the audit story.
	b.navigate(base + "/entries/" + url.PathEscape(ref))
	if !b.exists("p#approval") || !b.exists("#timeline") {
		b.fatalf("entry page lacks p#approval or #timeline")
	}
	apr := b.text("p#approval")
	for _, want := range []string{id, "approved", "alice", reason, "platform-oncall"} {
		if !strings.Contains(apr, want) {
			b.fatalf("p#approval reads %q, want it to contain %q", apr, want)
		}
	}
	if story := b.text("#timeline"); !strings.Contains(story, "approval approved") {
		b.fatalf("#timeline lacks the approval:\n%s", story)
	}

	// The store agrees, and the approval takes effect: the next reconcile
	// replays the entry once.
	if a := f.approvalRecord(t, id); a.State != store.ApprovalApproved || a.DecidedBy != "alice" || a.Reason != reason {
		t.Fatalf("stored approval: state %s by %q (%q)", a.State, a.DecidedBy, a.Reason)
	}
	f.reconcile(t, "ops-bot")
	if n := f.deliveries("key-h1"); n != 1 {
		t.Fatalf("after approval the entry was delivered %d times, want once", n)
	}
	if a := f.approvalRecord(t, id); !a.Used {
		t.Fatalf("the approval is not marked used after its replay: %+v", a)
	}
	t.Logf("browser approval flow took %s", time.Since(began).Round(time.Millisecond))
}

// browserTab wraps a chromedp tab: a failing step fails the test with the
// page's URL and HTML, so a failure in CI can be read from the log.
type browserTab struct {
	t   *testing.T
	ctx context.Context
}

func (b *browserTab) fatalf(format string, args ...any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		html = "(page unavailable: " + err.Error() + ")"
	}
	b.t.Logf("browser is on %s; page:\n%s", loc, html)
	b.t.Fatalf(format, args...)
}

func (b *browserTab) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.fatalf("browser: %v", err)
	}
}

// navigate loads url and requires the final answer (after redirects) to be 200.
func (b *browserTab) navigate(url string) {
	b.t.Helper()
	resp, err := chromedp.Run(b.ctx, chromedp.NavigateResponse(url))
	if err != nil {
		b.fatalf("navigate to %s: %v", url, err)
	}
	if resp.Status != http.StatusOK {
		b.fatalf("navigate to %s: status %d", url, resp.Status)
	}
}

// submit runs a step that submits a form and waits for the page that
// answers it, which must be 200.
func (b *browserTab) submit(step chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	resp, err := chromedp.RunResponse(b.ctx, step)
	if err != nil {
		b.fatalf("submit: %v", err)
	}
	if resp.Status != http.StatusOK {
		b.fatalf("submit: status %d", resp.Status)
	}
}

func (b *browserTab) location() string {
	b.t.Helper()
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		b.fatalf("location: %v", err)
	}
	return loc
}

func (b *browserTab) eval(js string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// exists reports at once whether the page has an element matching sel
// (the chromedp queries wait for one to appear).
func (b *browserTab) exists(sel string) bool {
	b.t.Helper()
	ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.querySelector(`+strconv.Quote(sel)+`) !== null`))
	if err != nil {
		b.fatalf("query %s: %v", sel, err)
	}
	return ok
}

func (b *browserTab) text(sel string) string {
	b.t.Helper()
	if !b.exists(sel) {
		b.fatalf("no element %s on the page", sel)
	}
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

func (b *browserTab) value(sel string) string {
	b.t.Helper()
	if !b.exists(sel) {
		b.fatalf("no element %s on the page", sel)
	}
	s, err := chromedp.Run(b.ctx, chromedp.Value(chromedp.CSS(sel)))
	if err != nil {
		b.fatalf("value of %s: %v", sel, err)
	}
	return s
}

// browserNoRedirects is a plain HTTP client that shows each answer as it is.
var browserNoRedirects = &http.Client{Timeout: 10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// postFormWithCookie posts a urlencoded form with one session cookie.
func postFormWithCookie(t *testing.T, target string, session *network.Cookie, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
	resp, err := browserNoRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

var browserCSRFField = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

// csrfOfAnotherSession logs a second user in over plain HTTP and returns
// the CSRF token of that session's pages (the log-out form carries one).
func csrfOfAnotherSession(t *testing.T, base, secret string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	// Open the login page first, as a browser does: the form carries the
	// login CSRF token bound to a cookie set with it.
	lp, err := c.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	form, _ := io.ReadAll(lp.Body)
	lp.Body.Close()
	lm := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindSubmatch(form)
	if lm == nil {
		t.Fatalf("login page without its CSRF field:\n%s", form)
	}
	resp, err := c.PostForm(base+"/login", url.Values{"token": {secret}, "next": {"/approvals"}, "csrf": {string(lm[1])}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := browserCSRFField.FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("second session: %d, no CSRF token in\n%s", resp.StatusCode, page)
	}
	return string(m[1])
}
