package server

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is the injected clock for session expiry (no sleeping).
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func sessionCookieOf(t *testing.T, ui *browser) *http.Cookie {
	t.Helper()
	u, _ := url.Parse(ui.base)
	for _, c := range ui.c.Jar.Cookies(u) {
		if c.Name == sessionCookie {
			return c
		}
	}
	t.Fatal("no session cookie in the jar")
	return nil
}

// getWithCookie requests path with only the given session cookie, as an
// attacker who copied it would.
func getWithCookie(t *testing.T, base, path, value string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: value})
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// TestUISessionIsServerSideAndLogoutRevokesIt: issue #14 "The UI session
// cookie is the raw API token and logout revokes nothing". The cookie now
// holds a random session id, never the token; after logout the copied
// cookie no longer opens a page.
func TestUISessionIsServerSideAndLogoutRevokesIt(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	ui := newBrowser(t, b.http.URL)
	if code, _, _ := ui.login(b.tokens["alice"], "/"); code != http.StatusSeeOther {
		t.Fatalf("login: %d", code)
	}
	c := sessionCookieOf(t, ui)
	if c.Value == b.tokens["alice"] || strings.HasPrefix(c.Value, "rpl_") || len(c.Value) < 64 {
		t.Fatalf("session cookie %q carries the token or is short", c.Value)
	}
	if code, _ := getWithCookie(t, b.http.URL, "/approvals", c.Value); code != http.StatusOK {
		t.Fatalf("session cookie before logout: %d", code)
	}
	// The token itself is not a session id.
	if code, loc := getWithCookie(t, b.http.URL, "/approvals", b.tokens["alice"]); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/login") {
		t.Fatalf("raw token as cookie: %d %s, want the login page", code, loc)
	}
	_, _, page := ui.get("/")
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token on the overview")
	}
	if code, loc, _ := ui.post("/logout", url.Values{"csrf": {m[1]}}); code != http.StatusSeeOther || loc != "/login" {
		t.Fatalf("logout: %d %s", code, loc)
	}
	if code, loc := getWithCookie(t, b.http.URL, "/approvals", c.Value); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/login") {
		t.Fatalf("copied cookie after logout: %d %s, want the login page", code, loc)
	}
	// The API refuses it too.
	req, _ := http.NewRequest(http.MethodGet, b.http.URL+"/api/dead-letters", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: c.Value})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API with a logged-out session: %d", resp.StatusCode)
	}
}

// TestUISessionExpires: idle and absolute expiry, on the injected clock.
func TestUISessionExpires(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	b := newAPIBundle(t, []string{line("e1", "timeout", "")}, func(c *Config) { c.Now = clock.Now })

	// Idle: one request just inside the idle window keeps it alive; a gap
	// of the whole window ends it.
	ui := newBrowser(t, b.http.URL)
	ui.login(b.tokens["alice"], "/")
	id := sessionCookieOf(t, ui).Value
	clock.Add(SessionIdle - time.Minute)
	if code, _ := getWithCookie(t, b.http.URL, "/approvals", id); code != http.StatusOK {
		t.Fatalf("inside the idle window: %d", code)
	}
	clock.Add(SessionIdle)
	if code, _ := getWithCookie(t, b.http.URL, "/approvals", id); code != http.StatusSeeOther {
		t.Fatalf("after the idle window: %d, want the login page", code)
	}

	// Absolute: kept busy, it still ends SessionAbsolute after login.
	ui = newBrowser(t, b.http.URL)
	ui.login(b.tokens["alice"], "/")
	id = sessionCookieOf(t, ui).Value
	for since := SessionIdle / 2; ; since += SessionIdle / 2 {
		clock.Add(SessionIdle / 2)
		code, _ := getWithCookie(t, b.http.URL, "/approvals", id)
		if since < SessionAbsolute {
			if code != http.StatusOK {
				t.Fatalf("busy session %v after login: %d", since, code)
			}
			continue
		}
		if code != http.StatusSeeOther {
			t.Fatalf("busy session %v after login (past the absolute limit): %d, want the login page", since, code)
		}
		break
	}
}

// TestUICSRFTokenBelongsToItsSession: a CSRF token from one session does
// not pass with another.
func TestUICSRFTokenBelongsToItsSession(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	a, c := newBrowser(t, b.http.URL), newBrowser(t, b.http.URL)
	a.login(b.tokens["alice"], "/")
	c.login(b.tokens["alice"], "/")
	_, _, page := a.get("/")
	m := csrfRe.FindStringSubmatch(page)
	if code, _, _ := c.post("/logout", url.Values{"csrf": {m[1]}}); code != http.StatusForbidden {
		t.Fatalf("logout with another session's CSRF token: %d, want 403", code)
	}
}

// TestUISessionCookieSecureBehindTLSProxy: behind a proxy that terminates
// TLS (PublicURL https) the cookie is Secure though the request is plain
// HTTP; without one it is not (the browser would drop it on http).
func TestUISessionCookieSecureBehindTLSProxy(t *testing.T) {
	for _, tc := range []struct {
		public string
		secure bool
	}{{"https://replayctl.example.com", true}, {"", false}} {
		b := newAPIBundle(t, []string{line("e1", "timeout", "")}, func(c *Config) { c.PublicURL = tc.public })
		ui := newBrowser(t, b.http.URL)
		_, _, page := ui.get("/login")
		m := loginCSRFRe.FindStringSubmatch(page)
		resp, err := ui.c.PostForm(b.http.URL+"/login", url.Values{"token": {b.tokens["alice"]}, "csrf": {m[1]}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var set string
		for _, h := range resp.Header.Values("Set-Cookie") {
			if strings.HasPrefix(h, sessionCookie+"=") {
				set = h
			}
		}
		if set == "" || strings.Contains(set, "; Secure") != tc.secure || !strings.Contains(set, "HttpOnly") || !strings.Contains(set, "SameSite=Strict") {
			t.Fatalf("PublicURL %q: Set-Cookie %q, want Secure=%v, HttpOnly, SameSite=Strict", tc.public, set, tc.secure)
		}
	}
}

// TestUILoginEndsThePreviousSession: logging in again (as the same or
// another user) gives a new session id and ends the old one.
func TestUILoginEndsThePreviousSession(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	ui := newBrowser(t, b.http.URL)
	ui.login(b.tokens["viewer"], "/")
	old := sessionCookieOf(t, ui).Value
	ui.login(b.tokens["alice"], "/")
	if now := sessionCookieOf(t, ui).Value; now == old {
		t.Fatal("login kept the session id")
	}
	if code, _ := getWithCookie(t, b.http.URL, "/approvals", old); code != http.StatusSeeOther {
		t.Fatalf("the previous session still works: %d", code)
	}
}

// TestAPIWritesRefuseTheSessionCookie: the session cookie reads the API
// but cannot change anything through it (the API has no CSRF token); a
// bearer token can.
func TestAPIWritesRefuseTheSessionCookie(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	ui := newBrowser(t, b.http.URL)
	ui.login(b.tokens["operator"], "/")
	id := sessionCookieOf(t, ui).Value
	do := func(method, path string) int {
		req, _ := http.NewRequest(method, b.http.URL+path, nil)
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: id})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := do(http.MethodGet, "/api/dead-letters"); code != http.StatusOK {
		t.Fatalf("GET with the session cookie: %d", code)
	}
	if code := do(http.MethodPost, "/api/reconcile"); code != http.StatusForbidden {
		t.Fatalf("POST /api/reconcile with only the session cookie: %d, want 403", code)
	}
	req, _ := http.NewRequest(http.MethodPost, b.http.URL+"/api/reconcile", nil)
	req.Header.Set("Authorization", "Bearer "+b.tokens["operator"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /api/reconcile with a bearer token: %d", resp.StatusCode)
	}
	b.srv.Wait()
}
