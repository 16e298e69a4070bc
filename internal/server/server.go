package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/maintenance"
	"github.com/replayctl/replayctl/internal/notify"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// MaxBody bounds request bodies (413 past it).
const MaxBody = 1 << 20

// Store is everything the server reads and changes: the one store
// contract.
type Store = store.Backend

// Config wires a server.
type Config struct {
	Store  Store
	Tokens *Tokens
	// Engine loads the current rules and policy; called for every run and
	// dry run, so edits apply without a restart (and a broken edit fails
	// that run, not the server).
	Engine func(ctx context.Context) (*triage.Engine, triage.Snapshot, error)
	// ConfigFiles are the files (or directories) Engine loads: /readyz
	// loads again only when one of them changed since the last load.
	ConfigFiles []string
	Router      func(rules *triage.Rules) replay.Router
	Sources     []source.Source
	Approvers   *approval.Config
	// Every schedules reconciles (0: only on request).
	Every       time.Duration
	MaxParallel int
	Rate        float64
	Logger      *slog.Logger
	Now         func() time.Time
	// CSRFKey signs the web UI's forms (random at start when empty).
	CSRFKey []byte
	// Timeouts for HTTPServer (zero fields: DefaultTimeouts()).
	Timeouts Timeouts
	// AuditKey, when set, is the key the store signs the audit head with;
	// every verification the server makes (API and UI) checks it.
	AuditKey []byte
	// MaxUnauthenticated caps anonymous requests in progress
	// (0: DefaultMaxUnauthenticated).
	MaxUnauthenticated int
	// MaxHeavy caps the heavy requests (lists, plan, exports,
	// verifications) in progress; past it they get 429 (0: DefaultMaxHeavy).
	MaxHeavy int
	// Proxy, when set, lets a trusted reverse proxy sign people in.
	Proxy *ProxyAuth
	// Notify, when set, tells approvers when a run opens approvals;
	// PublicURL is this server's address as people reach it (for links).
	Notify    *notify.Notifier
	PublicURL string
	// Remind, with Notify, reminds approvers of requests pending past
	// Remind.After, once per Remind.Every (zero After: never).
	Remind notify.Aging
	// Breakers are the targets' circuit breakers, shared by every run,
	// replay and bulk replay of this server (default: a new set).
	Breakers *replay.Breakers
	// ForEntry finds a stored entry's source again for a replay outside a
	// run (the API's single and bulk replays), so its write-back runs
	// (replay.Reconciler.ForEntry); nil: none.
	ForEntry func(*entry.Entry) (source.Source, bool)
	// Maintenance are serve's background duties: their rounds and errors
	// are exported in /metrics and a failed one is named in /readyz.
	Maintenance *maintenance.Group
	// BacktestCandidates are the candidate rules and policies the console's
	// backtest page offers by name (ui_backtest.go).
	BacktestCandidates []BacktestCandidate
}

// Server is the HTTP service.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	metrics *Metrics
	runs    *runner
	ui      *ui
	unauth  chan struct{} // slots for requests without credentials
	// heavySlots bound the heavy requests in progress (paging.go).
	heavySlots chan struct{}
	rem        reminders
	// verified is the audit head verified so far (incremental verification).
	verified audit.Incremental
	// handler is mux behind the cross-origin check (ui_session.go).
	handler http.Handler
	// lastLoad is the last configuration load's verdict (readiness.go).
	lastLoad lastLoad
	// backtesting is set while a policy backtest runs: one at a time.
	backtesting atomic.Bool
}

// New builds the server and its routes.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Approvers == nil {
		cfg.Approvers = &approval.Config{Expiry: approval.DefaultExpiry}
	}
	if cfg.MaxUnauthenticated <= 0 {
		cfg.MaxUnauthenticated = DefaultMaxUnauthenticated
	}
	if cfg.Breakers == nil {
		cfg.Breakers = replay.NewBreakers(replay.SystemClock{})
	}
	if cfg.MaxHeavy <= 0 {
		cfg.MaxHeavy = DefaultMaxHeavy
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), unauth: make(chan struct{}, cfg.MaxUnauthenticated),
		heavySlots: make(chan struct{}, cfg.MaxHeavy)}
	s.metrics = newMetrics(cfg.Store, cfg.Now)
	s.cfg.Router = timeRouter(cfg.Router, newDispatchHistogram(s.metrics.reg))
	s.metrics.reg.MustRegister(newBreakerCollector(cfg.Breakers))
	if cfg.Maintenance != nil {
		s.metrics.reg.MustRegister(maintenanceCollector{cfg.Maintenance})
	}
	if cfg.Notify != nil {
		cfg.Notify.Failed = func(string) { s.metrics.notifyFailed.Inc() }
	}
	s.runs = &runner{srv: s, runs: map[string]*Run{}, recs: runStore(cfg.Store)}
	u, err := newUI(s)
	if err != nil {
		return nil, err
	}
	s.ui = u
	s.routes()
	if s.handler, err = s.crossOriginGuard(s.mux); err != nil {
		return nil, err
	}
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.limitUnauthenticated(w, r, s.handler)
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	m.HandleFunc("GET /readyz", s.handleReady)
	m.Handle("GET /metrics", s.metrics.handler())

	m.HandleFunc("GET /api/dead-letters", s.auth(permRead, s.heavy(s.handleListEntries)))
	m.HandleFunc("POST /api/dead-letters/replay", s.auth(permOperate, s.handleBulk(false)))
	m.HandleFunc("POST /api/dead-letters/resolve", s.auth(permOperate, s.handleBulk(true)))
	m.HandleFunc("GET /api/dead-letters/{id}", s.auth(permRead, s.handleShowEntry))
	m.HandleFunc("POST /api/dead-letters/{id}/replay", s.auth(permOperate, s.handleReplayEntry))
	m.HandleFunc("POST /api/dead-letters/{id}/resolve", s.auth(permOperate, s.handleResolveEntry))
	m.HandleFunc("POST /api/dead-letters/{id}/release", s.auth(permOperate, s.handleReleaseEntry))
	m.HandleFunc("POST /api/dead-letters/{id}/release-lineage", s.auth(permOperate, s.handleReleaseLineage))
	m.HandleFunc("GET /api/plan", s.auth(permRead, s.heavy(s.handlePlan)))
	m.HandleFunc("POST /api/reconcile", s.auth(permOperate, s.handleStartRun))
	m.HandleFunc("GET /api/runs/{id}", s.auth(permRead, s.handleGetRun))
	m.HandleFunc("GET /api/runs", s.auth(permRead, s.handleListRuns))
	m.HandleFunc("POST /api/runs/{id}/cancel", s.auth(permOperate, s.handleCancelRun))
	m.HandleFunc("GET /api/approvals", s.auth(permRead, s.heavy(s.handleListApprovals)))
	m.HandleFunc("POST /api/approvals/{id}/approve", s.auth(permApprove, s.handleDecideApproval(true)))
	m.HandleFunc("POST /api/approvals/{id}/reject", s.auth(permApprove, s.handleDecideApproval(false)))
	m.HandleFunc("POST /api/approvals/{id}/rerequest", s.auth(permOperate, s.handleRerequest))
	m.HandleFunc("GET /api/audit", s.auth(permRead, s.heavy(s.handleListAudit)))
	m.HandleFunc("GET /api/audit/verify", s.auth(permRead, s.heavy(s.handleVerifyAudit)))
	m.HandleFunc("GET /api/audit/checkpoint", s.auth(permRead, s.heavy(s.handleCheckpoint)))
	m.HandleFunc("GET /api/audit/export", s.auth(permRead, s.heavy(s.handleExportAudit)))
	m.HandleFunc("GET /api/audit/{id}", s.auth(permRead, s.handleShowAudit))
	m.HandleFunc("GET /api/snapshots/{id}", s.auth(permRead, s.handleSnapshot))
	m.HandleFunc("POST /api/policy/backtest", s.auth(permRead, s.handleBacktest))
	m.HandleFunc("GET /api/stats", s.auth(permRead, s.handleStats))
	m.HandleFunc("GET /api/groups", s.auth(permRead, s.handleListGroups))
	m.HandleFunc("GET /api/groups/{id}", s.auth(permRead, s.handleShowGroup))
	m.HandleFunc("POST /api/groups/{id}/{verb}", s.auth(permOperate, s.handleChangeGroup))
	s.planRoutes(m) // api_plans.go: plans, and the backtest page
	m.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such API route: "+r.Method+" "+r.URL.Path)
	})
	s.ui.routes(m)
}

// Error is the JSON body of every error response.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]Error{"error": {Code: code, Message: msg}})
}

// readJSON decodes a size-limited body strictly (unknown fields are 400).
// An empty body leaves v as it is.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var tooBig *http.MaxBytesError
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return true
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over %d bytes", MaxBody))
	default:
		writeError(w, http.StatusBadRequest, "bad_request", "invalid JSON body: "+err.Error())
	}
	return false
}

type ctxKey struct{}

// user returns the authenticated token of a request.
func user(r *http.Request) Token {
	t, _ := r.Context().Value(ctxKey{}).(Token)
	return t
}

// auth requires a bearer token (or the UI's session cookie) with perm.
func (s *Server) auth(p perm, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := s.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="replayctl"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required (replayctl tokens create)")
			return
		}
		if !tok.can(p) {
			writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("role %s may not %s %s: it takes role %s", tok.Role, r.Method, r.URL.Path, p.roles()))
			return
		}
		if s.cookieOnlyWrite(r) {
			writeError(w, http.StatusForbidden, "forbidden", "API writes need a bearer token: the session cookie only works for the web UI's forms, which carry a CSRF token")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, tok)))
	}
}

func (s *Server) authenticate(r *http.Request) (Token, bool) {
	if tok, ok := r.Context().Value(authKey{}).(Token); ok {
		return tok, true // limitUnauthenticated authenticated this request
	}
	if h := r.Header.Get("Authorization"); h != "" {
		secret, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return Token{}, false
		}
		return s.cfg.Tokens.Lookup(strings.TrimSpace(secret))
	}
	if tok, ok := s.cfg.Proxy.authenticate(r); ok {
		return tok, true
	}
	if _, err := r.Cookie(sessionCookie); err == nil {
		return s.ui.sessionToken(r)
	}
	return Token{}, false
}

// authKey holds the Token a request was authenticated as, in its context.
type authKey struct{}

// serviceError maps service errors to statuses.
func serviceError(w http.ResponseWriter, err error) {
	var ce *triage.ConfigError
	switch {
	case errors.Is(err, replay.ErrNotFound), errors.Is(err, approval.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, replay.ErrAmbiguous):
		writeError(w, http.StatusBadRequest, "ambiguous", err.Error())
	case errors.Is(err, replay.ErrState), errors.Is(err, approval.ErrDecided),
		errors.Is(err, approval.ErrStale), errors.Is(err, approval.ErrExpired), errors.Is(err, errRunning):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, approval.ErrForbidden), errors.Is(err, approval.ErrSelfApproval):
		writeError(w, http.StatusForbidden, "forbidden", err.Error())
	case errors.As(err, &ce):
		writeError(w, http.StatusUnprocessableEntity, "invalid_configuration", err.Error())
	case errors.Is(err, errBadRequest):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

var errBadRequest = errors.New("bad request")

// handleReady answers whether this process can serve: the store answers.
// An invalid configuration is reported in the body and in
// replayctl_config_valid but does not make the pod unready: that would take
// the UI and the approval queue out of the Service exactly when people need
// them (runs are refused instead, see readiness.go).
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Store.View(r.Context(), func(store.Tx) error { return nil }); err != nil {
		writeError(w, http.StatusServiceUnavailable, "not_ready", "state store: "+err.Error())
		return
	}
	body := map[string]string{"status": "ready", "config": "valid"}
	if err := s.configReadiness(r.Context()); err != nil {
		body["config"] = "invalid: " + err.Error()
	}
	if s.cfg.Maintenance != nil {
		// A failing duty is reported, not made unready (as a config error).
		body["maintenance"] = s.cfg.Maintenance.Summary(s.cfg.Now())
	}
	writeJSON(w, 200, body)
}

// Start runs the scheduler until ctx is done, then waits for a run in
// progress to finish (its in-flight dispatches finish or are recorded
// outcome_unknown; nothing is lost).
func (s *Server) Start(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	if s.cfg.Every > 0 {
		// The first run is due now: the stalled alert counts from here
		// until a run succeeds. Without a schedule nothing is due.
		s.metrics.firstDue.WithLabelValues().Set(float64(s.cfg.Now().Unix()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.runs.schedule(ctx, s.cfg.Every)
		}()
	}
	return &wg
}

// Wait blocks until no reconcile is running.
func (s *Server) Wait() { s.runs.wait() }
