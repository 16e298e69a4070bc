package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Session lifetimes of the web UI: a session ends after SessionIdle
// without a request, and SessionAbsolute after login whatever happens, so
// a cookie left in a shared browser does not stay a key for long.
const (
	SessionIdle     = 30 * time.Minute
	SessionAbsolute = 12 * time.Hour
)

// session is one signed-in browser. The cookie holds only its random id:
// the API token the person typed is never sent back to the browser, and
// logging out deletes the session so a copied cookie stops working.
type session struct {
	tokenHash string // which token signed in; re-checked on every request
	created   time.Time
	seen      time.Time
}

// sessions is the server-side session table (in memory: a restart signs
// everyone out, which is the safe direction).
type sessions struct {
	mu   sync.Mutex
	m    map[string]*session // key: hashToken(session id)
	now  func() time.Time
	idle time.Duration
	max  time.Duration
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{m: map[string]*session{}, now: now, idle: SessionIdle, max: SessionAbsolute}
}

// create starts a session for the token with hash tokenHash and returns
// its id (the cookie value).
func (s *sessions) create(tokenHash string) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(raw[:])
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	s.m[hashToken(id)] = &session{tokenHash: tokenHash, created: now, seen: now}
	return id, nil
}

// lookup returns the live session for id and marks it used.
func (s *sessions) lookup(id string) (*session, bool) {
	if id == "" {
		return nil, false
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := hashToken(id)
	ss, ok := s.m[k]
	if !ok {
		return nil, false
	}
	if s.expired(ss, now) {
		delete(s.m, k)
		return nil, false
	}
	ss.seen = now
	return ss, true
}

func (s *sessions) expired(ss *session, now time.Time) bool {
	return now.Sub(ss.seen) >= s.idle || now.Sub(ss.created) >= s.max
}

// remove ends a session (logout).
func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, hashToken(id))
}

// sweep drops expired sessions so the table cannot grow without bound;
// called with mu held.
func (s *sessions) sweep(now time.Time) {
	for k, ss := range s.m {
		if s.expired(ss, now) {
			delete(s.m, k)
		}
	}
}

// sessionToken authenticates a request by its session cookie.
func (u *ui) sessionToken(r *http.Request) (Token, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return Token{}, false
	}
	ss, ok := u.sessions.lookup(c.Value)
	if !ok {
		return Token{}, false
	}
	return u.s.cfg.Tokens.byHash(ss.tokenHash)
}

// startSession signs the browser in as tok.
func (u *ui) startSession(w http.ResponseWriter, r *http.Request, tok Token) error {
	// A new login never continues an old session (nor one an attacker
	// planted): the browser's previous session, if any, ends here.
	if c, err := r.Cookie(sessionCookie); err == nil {
		u.sessions.remove(c.Value)
	}
	id, err := u.sessions.create(tok.Hash)
	if err != nil {
		return err
	}
	// Strict: another site can neither post with nor link into a session;
	// every change also needs the session's CSRF token.
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: u.secure(r), MaxAge: int(SessionAbsolute / time.Second)})
	return nil
}

// secure: the browser reaches this server over TLS, directly or through a
// proxy that terminates it (PublicURL is https).
func (u *ui) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(u.s.cfg.PublicURL, "https://")
}

func (u *ui) endSession(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		u.sessions.remove(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: u.secure(r)})
}

// crossOriginGuard refuses every state-changing request a browser made
// from another origin (Sec-Fetch-Site, else Origin against Host), whatever
// authenticates it. A trusted proxy adds X-Forwarded-User to whatever the
// browser sends through it, so before this a text/plain POST from any page
// an SSO user had open approved (200), reconciled (202) and resolved (200)
// as that user (issue 29). Requests without either header (the CLI, curl,
// scripts) are not a browser's and pass; GET, HEAD and OPTIONS always do.
// PublicURL's origin is trusted too: behind a proxy that rewrites Host the
// browser's Origin is the public one.
func (s *Server) crossOriginGuard(next http.Handler) (http.Handler, error) {
	cop := http.NewCrossOriginProtection()
	if pu := s.cfg.PublicURL; pu != "" {
		u, err := url.Parse(pu)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("public URL %q: want scheme://host[:port]", pu)
		}
		if err := cop.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			return nil, fmt.Errorf("public URL %q: %w", pu, err)
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross_origin", "cross-origin request refused: changes are only accepted from this server's own pages or from clients that are not browsers")
	}))
	return cop.Handler(next), nil
}

// cookieOnlyWrite reports an API request that changes something and is
// authenticated by nothing but the UI's session cookie. The API has no
// CSRF token, so such a request could have been made by another page
// the browser has open; the web UI's own forms post to UI routes, never
// to the API.
func (s *Server) cookieOnlyWrite(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	if r.Header.Get("Authorization") != "" {
		return false
	}
	if _, ok := s.cfg.Proxy.authenticate(r); ok {
		return false
	}
	_, err := r.Cookie(sessionCookie)
	return err == nil
}
