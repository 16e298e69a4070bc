package server

import (
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// tokenClock is the injected clock of token expiry (safe for the server's
// goroutines).
type tokenClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *tokenClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *tokenClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// get sends GET path with secret as a bearer token, or as the UI's session
// cookie, and returns the status.
func getWith(t *testing.T, b *apiBundle, path, secret string, cookie bool) int {
	t.Helper()
	req, err := http.NewRequest("GET", b.http.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cookie {
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: uiSession(t, b, secret)})
	} else {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// uiSession is the session id a UI login with secret started: logged in
// once per bundle and token while the token is still valid, then reused, so
// a later revoke or expiry is seen through the session it left behind.
func uiSession(t *testing.T, b *apiBundle, secret string) string {
	t.Helper()
	b.mu.Lock()
	id, ok := b.sessions[secret]
	b.mu.Unlock()
	if ok {
		return id
	}
	ui := newBrowser(t, b.http.URL)
	if code, _, _ := ui.login(secret, "/"); code != http.StatusSeeOther {
		t.Fatalf("UI login: %d", code)
	}
	id = sessionCookieOf(t, ui).Value
	b.mu.Lock()
	if b.sessions == nil {
		b.sessions = map[string]string{}
	}
	b.sessions[secret] = id
	b.mu.Unlock()
	return id
}

// tokenID finds the id of user's token in the file, as `tokens list` shows it.
func tokenID(t *testing.T, tokens *Tokens, user string) string {
	t.Helper()
	all, err := tokens.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range all {
		if tok.User == user {
			return tok.ID
		}
	}
	t.Fatalf("no token for %s", user)
	return ""
}

// Issue 14: "Tokens: list, revoke and expiry, taking effect without a
// restart." The server keeps running; another Tokens on the same file (what
// `replayctl tokens revoke` does in its own process) revokes one token, and
// the server refuses it from the next request on, as a bearer token and as
// a UI session, while the others keep working.
func TestRevokedTokenIsRefusedByARunningServer(t *testing.T) {
	b := newAPIBundle(t, []string{`{"id":"e1","reason_code":"timeout","idempotency_key":"k1","payload":{}}`})
	secret := b.tokens["operator"]
	for _, cookie := range []bool{false, true} {
		if code := getWith(t, b, "/api/dead-letters", secret, cookie); code != http.StatusOK {
			t.Fatalf("before revoke (cookie %v): %d", cookie, code)
		}
	}
	cli, err := LoadTokens(b.srv.cfg.Tokens.path)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cli.Revoke(tokenID(t, cli, "operator"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if tok.Revoked == nil || tok.Status(time.Now()) != "revoked" {
		t.Fatalf("revoked token: %+v", tok)
	}
	for _, cookie := range []bool{false, true} {
		if code := getWith(t, b, "/api/dead-letters", secret, cookie); code != http.StatusUnauthorized {
			t.Errorf("after revoke (cookie %v): %d, want 401", cookie, code)
		}
	}
	if code := getWith(t, b, "/api/dead-letters", b.tokens["admin"], false); code != http.StatusOK {
		t.Errorf("another token after the revoke: %d", code)
	}
	// The revoked token stays listed, so who had access stays known.
	all, _ := cli.List()
	if len(all) != 6 {
		t.Errorf("%d tokens listed after a revoke, want 6", len(all))
	}
	if _, err := cli.Revoke("tok_nope", time.Now()); err == nil {
		t.Error("revoking an unknown id succeeded")
	}
}

// A token created while the server runs works at once; one created with an
// expiry is refused once the (injected) clock passes it, without a restart.
func TestExpiringTokenOnARunningServer(t *testing.T) {
	clock := &tokenClock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	b := newAPIBundle(t, nil, func(c *Config) { c.Tokens.Now = clock.Now })
	cli, err := LoadTokens(b.srv.cfg.Tokens.path)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := cli.CreateExpiring("contractor", RoleViewer, clock.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if code := getWith(t, b, "/api/dead-letters", secret, false); code != http.StatusOK {
		t.Fatalf("new token on the running server: %d", code)
	}
	uiSession(t, b, secret) // a browser signed in before the expiry
	clock.advance(59 * time.Minute)
	if code := getWith(t, b, "/api/dead-letters", secret, false); code != http.StatusOK {
		t.Fatalf("a minute before expiry: %d", code)
	}
	clock.advance(time.Minute)
	for _, cookie := range []bool{false, true} {
		if code := getWith(t, b, "/api/dead-letters", secret, cookie); code != http.StatusUnauthorized {
			t.Errorf("at expiry (cookie %v): %d, want 401", cookie, code)
		}
	}
	all, _ := cli.List()
	if got := all[len(all)-1].Status(clock.Now()); got != "expired" {
		t.Errorf("status %q, want expired", got)
	}
	if _, err := cli.CreateExpiring("x", RoleViewer, clock.Now(), -time.Second); err == nil {
		t.Error("a negative expiry was accepted")
	}
}

// A token file that becomes unreadable (a bad hand edit) authenticates no
// one, rather than leaving the tokens it held before, a revoked one
// included; fixing the file brings them back, still without a restart.
func TestUnreadableTokenFileFailsClosed(t *testing.T) {
	b := newAPIBundle(t, nil)
	path := b.srv.cfg.Tokens.path
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	replace := func(data []byte) {
		tmp := filepath.Join(filepath.Dir(path), "edit.tmp")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	replace([]byte(`[{"user": "admin", "role": `))
	if code := getWith(t, b, "/api/dead-letters", b.tokens["admin"], false); code != http.StatusUnauthorized {
		t.Errorf("with a broken token file: %d, want 401", code)
	}
	replace(good)
	if code := getWith(t, b, "/api/dead-letters", b.tokens["admin"], false); code != http.StatusOK {
		t.Errorf("after the fix: %d, want 200", code)
	}
}

// Token files written before ids existed get a stable id from the hash, so
// their tokens can be listed and revoked.
func TestTokenFileWithoutIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	old := `[{"user":"alice","role":"admin","sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","created":"2026-01-01T00:00:00Z"}]`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tokens.Lookup("test"); !ok { // sha256("test") is the hash above
		t.Fatal("old token not found")
	}
	if _, err := tokens.Revoke("tok_9f86d081884c", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, ok := tokens.Lookup("test"); ok {
		t.Error("revoked old token still authenticates")
	}
}

// Issue returns the token it stored, as the file holds it: `tokens create
// -o json` prints that instead of reading the file back and taking its
// last token, which another process may have appended meanwhile.
func TestIssueReturnsTheStoredToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	a, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	secret, tok, err := a.Issue("alice", "operator", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Another process adds a token after this one.
	b, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create("bob", "viewer", now); err != nil {
		t.Fatal(err)
	}
	all, err := b.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != tok.ID || all[0].User != "alice" || all[0].Role != "operator" ||
		all[0].Expires == nil || tok.Expires == nil || !all[0].Expires.Equal(*tok.Expires) || !tok.Expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("issued %+v, file holds %+v", tok, all)
	}
	if tok.Hash != hashToken(secret) {
		t.Fatal("the issued token's hash is not the secret's")
	}
}
