package server

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
)

//go:embed templates/*.html
var templateFS embed.FS

// staticFS holds the console's stylesheet and its optional script.
//
//go:embed static
var staticFS embed.FS

const sessionCookie = "replayctl_session"

type ui struct {
	s        *Server
	tmpl     map[string]*template.Template
	key      []byte
	sessions *sessions
}

func newUI(s *Server) (*ui, error) {
	key := s.cfg.CSRFKey
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	funcs := template.FuncMap{
		"since": func(t time.Time) string { return s.cfg.Now().Sub(t).Round(time.Second).String() },
		"time":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"story": func(r audit.Record) string { return audit.Sentence(&r) },
		"path":  url.PathEscape,
		"join":  strings.Join,
		"mulf":  func(f float64) float64 { return 100 * f },
		"minus": func(a, b int) int { return a - b },
		"list":  func(v ...string) []string { return v },
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			return humanAge(s.cfg.Now().Sub(t)) + " ago"
		},
		"dur": func(a, b time.Time) string { return b.Sub(a).Round(time.Millisecond).String() },
	}
	u := &ui{s: s, tmpl: map[string]*template.Template{}, key: key, sessions: newSessions(s.cfg.Now)}
	for _, page := range []string{"login", "overview", "approvals", "entry", "audit", "bulk", "entries", "act", "runs", "run", "groups"} {
		files := []string{"templates/layout.html", "templates/" + page + ".html"}
		if page == "overview" || page == "groups" {
			files = append(files, "templates/groups_table.html")
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, files...)
		if err != nil {
			return nil, err
		}
		u.tmpl[page] = t
	}
	if err := u.parsePages(funcs, "plan", "backtest"); err != nil { // api_plans.go, ui_backtest.go
		return nil, err
	}
	return u, nil
}

func (u *ui) routes(m *http.ServeMux) {
	m.HandleFunc("GET /login", u.loginPage)
	m.HandleFunc("POST /login", u.login)
	m.HandleFunc("POST /logout", u.page(permRead, u.logout))
	m.HandleFunc("GET /{$}", u.page(permRead, u.overview))
	m.HandleFunc("GET /approvals", u.page(permRead, u.approvalsPage))
	m.HandleFunc("POST /approvals/{id}/{decision}", u.page(permApprove, u.decide))
	m.HandleFunc("POST /approvals/decide", u.page(permApprove, u.decideMany))
	m.HandleFunc("POST /approvals/{id}/rerequest", u.page(permRead, u.rerequest))
	m.HandleFunc("GET /entries/{id}", u.page(permRead, u.entry))
	m.HandleFunc("GET /entries", u.page(permRead, u.entriesPage))
	m.HandleFunc("POST /entries/{id}/{op}", u.page(permOperate, u.entryAct))
	m.HandleFunc("GET /entries/act", u.page(permOperate, u.entryActPreview))
	m.HandleFunc("POST /entries/act", u.page(permOperate, u.entryActExecute))
	m.HandleFunc("GET /runs", u.page(permRead, u.runsPage))
	m.HandleFunc("GET /runs/{id}", u.page(permRead, u.runPage))
	m.HandleFunc("POST /runs/{id}/cancel", u.page(permOperate, u.cancelRunPage))
	m.Handle("GET /static/", http.FileServerFS(staticFS))
	m.HandleFunc("GET /audit", u.page(permRead, u.auditPage))
	m.HandleFunc("GET /groups", u.page(permRead, u.groupsPage))
	m.HandleFunc("POST /groups/{id}/{verb}", u.page(permOperate, u.groupAct))
	m.HandleFunc("GET /bulk", u.page(permRead, u.bulkPage))
	m.HandleFunc("POST /bulk", u.page(permOperate, u.bulkExecute))
}

// bulkFields are the bulk form's fields; the reason-code filter is
// reason_code, as in the API ("reason" is a resolution's justification).
var bulkFields = []string{"class", "reason_code", "topic", "source", "state", "older_than", "max", "spread", "all", "group"}

// bulkRequest reads the bulk form (query or posted form).
func bulkRequest(get func(string) string) (*BulkRequest, map[string]string, error) {
	q := map[string]string{}
	for _, k := range bulkFields {
		if v := strings.TrimSpace(get(k)); v != "" {
			q[k] = v
		}
	}
	req := &BulkRequest{}
	f := &req.Filter
	list := func(k string) []string {
		if q[k] == "" {
			return nil
		}
		return strings.Split(q[k], ",")
	}
	f.Classes, f.Reasons, f.Topics, f.Sources, f.States = list("class"), list("reason_code"), list("topic"), list("source"), list("state")
	f.All = q["all"] != ""
	f.Groups = list("group")
	var err error
	if v := q["older_than"]; v != "" {
		if f.OlderThan.Duration, err = time.ParseDuration(v); err != nil {
			return nil, q, fmt.Errorf("older than: %v", err)
		}
	}
	if v := q["spread"]; v != "" {
		if req.Spread.Duration, err = time.ParseDuration(v); err != nil {
			return nil, q, fmt.Errorf("spread: %v", err)
		}
	}
	if v := q["max"]; v != "" {
		if req.Max, err = strconv.Atoi(v); err != nil || req.Max < 1 {
			return nil, q, fmt.Errorf("max must be a positive number")
		}
	}
	return req, q, f.Compile()
}

func (u *ui) bulkPage(w http.ResponseWriter, r *http.Request, tok Token) {
	data := map[string]any{"CanOperate": tok.can(permOperate), "Flash": r.URL.Query().Get("flash"), "CanaryOver": canaryOfferOver}
	req, q, err := bulkRequest(r.URL.Query().Get)
	data["Q"] = q
	if err != nil {
		data["Error"] = err.Error()
	} else if len(q) > 0 {
		rep, _, err := u.s.StartBulk(r.Context(), req, tok.User, false, true, "ui")
		if err != nil {
			data["Error"] = err.Error()
		} else {
			data["Preview"] = rep
		}
	}
	u.render(w, r, http.StatusOK, "bulk", tok, data)
}

func (u *ui) bulkExecute(w http.ResponseWriter, r *http.Request, tok Token) {
	req, _, err := bulkRequest(r.PostFormValue)
	if err == nil {
		req.Canary, err = canaryForm(r.PostFormValue) // ui_groups.go
	}
	flash := ""
	if err == nil {
		var run *Run
		_, run, err = u.s.StartBulk(r.Context(), req, tok.User, false, false, "ui")
		if err == nil {
			flash = "bulk replay started as " + run.ID + " by " + tok.User
		}
	}
	if err != nil {
		flash = "not started: " + err.Error()
	}
	http.Redirect(w, r, "/bulk?flash="+url.QueryEscape(flash), http.StatusSeeOther)
}

// page requires a session with perm; without one it sends the browser to
// the login page.
func (u *ui) page(p perm, h func(http.ResponseWriter, *http.Request, Token)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := u.s.authenticate(r)
		if !ok {
			// Back to the same page, filters included (a shared link to a
			// filtered list survives the login).
			next := r.URL.Path
			if r.Method == http.MethodGet && r.URL.RawQuery != "" {
				next = r.URL.RequestURI()
			}
			http.Redirect(w, r, "/login?next="+url.QueryEscape(next), http.StatusSeeOther)
			return
		}
		if !tok.can(p) {
			u.render(w, r, http.StatusForbidden, "overview", tok, map[string]any{"Error": "your role (" + tok.Role + ") may not do this"})
			return
		}
		if r.Method == http.MethodPost && !u.validCSRF(r) {
			http.Error(w, "invalid or missing CSRF token: reload the page and try again", http.StatusForbidden)
			return
		}
		h(w, r, tok)
	}
}

// csrf binds a form token to the session: HMAC(key, session secret hash).
// A person signed in by the trusted proxy has no session: their token is
// bound to their identity instead (HMAC(key, "proxy", user)), so their
// forms work (they got an empty token and a 403 on every approve) and a
// token shown to one SSO user is worth nothing to another. Which binding
// applies follows authenticate: the proxy's user comes before a cookie.
func (u *ui) csrf(r *http.Request) string {
	m := hmac.New(sha256.New, u.key)
	if r.Header.Get("Authorization") == "" {
		if tok, ok := u.s.cfg.Proxy.authenticate(r); ok {
			m.Write([]byte("proxy\x00" + tok.User))
			return hex.EncodeToString(m.Sum(nil))
		}
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	m.Write([]byte(hashToken(c.Value)))
	return hex.EncodeToString(m.Sum(nil))
}

func (u *ui) validCSRF(r *http.Request) bool {
	r.Body = http.MaxBytesReader(nil, r.Body, MaxBody)
	want := u.csrf(r)
	return want != "" && hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(want))
}

func (u *ui) render(w http.ResponseWriter, r *http.Request, status int, page string, tok Token, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["User"], data["Role"], data["CSRF"], data["Page"] = tok.User, tok.Role, u.csrf(r), page
	var buf bytes.Buffer
	if err := u.tmpl[page].Execute(&buf, data); err != nil {
		http.Error(w, "render "+page+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// loginCookie carries a random value the login form must echo, so another
// site cannot post a login form and sign the browser in as someone else
// (login CSRF): it can neither read nor set this cookie.
const loginCookie = "replayctl_login"

func (u *ui) loginPage(w http.ResponseWriter, r *http.Request) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	nonce := hex.EncodeToString(raw[:])
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: nonce, Path: "/login", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: 3600})
	u.render(w, r, http.StatusOK, "login", Token{}, map[string]any{"Next": r.URL.Query().Get("next"), "LoginCSRF": nonce})
}

func (u *ui) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	c, err := r.Cookie(loginCookie)
	if err != nil || c.Value == "" || !hmac.Equal([]byte(c.Value), []byte(r.PostFormValue("csrf"))) {
		http.Error(w, "invalid login form: open /login and try again", http.StatusForbidden)
		return
	}
	secret := strings.TrimSpace(r.PostFormValue("token"))
	tok, ok := u.s.cfg.Tokens.Lookup(secret)
	if !ok {
		u.render(w, r, http.StatusUnauthorized, "login", Token{}, map[string]any{"Error": "unknown token"})
		return
	}
	if err := u.startSession(w, r, tok); err != nil {
		http.Error(w, "start session: "+err.Error(), http.StatusInternalServerError)
		return
	}
	next := r.PostFormValue("next")
	// Only a path on this server: browsers read "/\\host" and "/<tab>/host"
	// as "//host", another origin.
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\t\r\n") {
		next = "/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (u *ui) logout(w http.ResponseWriter, r *http.Request, _ Token) {
	u.endSession(w, r)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (u *ui) overview(w http.ResponseWriter, r *http.Request, tok Token) {
	o, err := u.overviewData(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	held := 0
	groups, err := u.groupsData(r.Context(), overviewGroups)
	if err == nil {
		held, err = u.heldGroups(r.Context())
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	u.render(w, r, http.StatusOK, "overview", tok, map[string]any{"Title": "Overview", "O": o, "Groups": groups, "Held": held,
		"CanOperate": tok.can(permOperate), "Back": "/", "Flash": r.URL.Query().Get("flash")})
}
