// Package nexoratest is the one fake of Nexora's observability server for
// tests, the dead-letter routes as it answers them (iamvirul/nexora
// nexora-cli ObserveCommand.java at 003de5b, the "/api/dead-letters/" and
// "/api/dead-letters" contexts; records as DeadLetterRecord.java; order
// as JdbcExecutionStore.findDeadLetters: WHERE review_state = ? ORDER BY
// failed_at DESC LIMIT ? OFFSET ?). It is written from those, not copied.
//
//   - GET /api/dead-letters?state=&page=&size=: state PENDING by default,
//     ALL for every state, another value 400; page 0 and size 20 by
//     default, size at most 100; the records newest first by failedAt;
//     every DeadLetterRecord field; {"items","page","size"}.
//   - POST /api/dead-letters/{id}/replay: 202 {"accepted":true,
//     "deadLetterId"} and the PENDING record is REPLAYED; 404 {"error":
//     "Dead letter not found"} for an unknown id; 409 {"error":"Dead
//     letter is not in PENDING state"} for one that is not.
//   - POST /api/dead-letters/{id}/resolve: any known record is RESOLVED,
//     200 {"resolved":true,"deadLetterId"}; 404 when unknown.
//   - Any other request under /api/dead-letters/: 405 {"error":"Method
//     Not Allowed"}.
//
// The bearer token (Token) is replayctl's NEXORA_TOKEN, for a server
// behind a proxy that checks it (Refuse: its status, 401 by default):
// Nexora itself checks none, nor does the fake when Token is "". Set its
// knobs and read its records under Mu once it serves.
package nexoratest

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a fake Nexora observability server.
type Server struct {
	*httptest.Server
	Token  string
	Refuse int
	Mu     sync.Mutex
	// State is each record's reviewState.
	State map[string]string
	// Failed is a record's failedAt; a record not in it failed one second
	// after the one before it in id order, from 12:00:00 (the last id
	// newest).
	Failed map[string]time.Time
	// Replays counts replay POSTs per id; Requests every request.
	Replays  map[string]int
	Requests int
	// Intercept, when set, sees every request first (after counting it);
	// true: it answered it.
	Intercept func(w http.ResponseWriter, r *http.Request) bool
	// DropAnswer: the next replay is done (REPLAYED) but the connection
	// drops before its answer.
	DropAnswer bool
	// Requeue: the execution a replay submits fails again, and Nexora
	// writes a new PENDING record with a new UUID and the same goal and
	// context (ObserveCommand.java:197-201, ExecutionEngine.java:145-158 at
	// 8ef2c3ea); its id is the replayed one's with "-r" appended, so that
	// it sorts, and so fails, later.
	Requeue bool
}

// New starts a server whose records are in states (id -> reviewState).
func New(t testing.TB, token string, states map[string]string) *Server {
	s := &Server{Token: token, State: states, Failed: map[string]time.Time{}, Replays: map[string]int{}}
	if s.State == nil {
		s.State = map[string]string{}
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Pending is states with every id PENDING.
func Pending(ids ...string) map[string]string {
	m := make(map[string]string, len(ids))
	for _, id := range ids {
		m[id] = "PENDING"
	}
	return m
}

// Holds reports whether record id is still PENDING.
func (s *Server) Holds(id string) bool {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.State[id] == "PENDING"
}

// Set sets record id's reviewState.
func (s *Server) Set(id, state string) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.State[id] = state
}

// RequestCount is how many requests the server was sent.
func (s *Server) RequestCount() int {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.Requests
}

var (
	replayPath  = regexp.MustCompile(`^/api/dead-letters/(.+)/replay$`)
	resolvePath = regexp.MustCompile(`^/api/dead-letters/(.+)/resolve$`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Requests++
	if s.Intercept != nil && s.Intercept(w, r) {
		return
	}
	if s.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.Token {
		w.WriteHeader(cmp.Or(s.Refuse, http.StatusUnauthorized))
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/api/dead-letters" {
		s.list(w, r)
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/api/dead-letters/") {
		http.NotFound(w, r)
		return
	}
	m := replayPath.FindStringSubmatch(r.URL.Path)
	resolve := resolvePath.FindStringSubmatch(r.URL.Path)
	switch {
	case r.Method == http.MethodPost && m != nil:
		s.Replays[m[1]]++
		st, ok := s.State[m[1]]
		switch {
		case !ok:
			JSON(w, http.StatusNotFound, map[string]any{"error": "Dead letter not found"})
		case st != "PENDING":
			JSON(w, http.StatusConflict, map[string]any{"error": "Dead letter is not in PENDING state"})
		default:
			s.State[m[1]] = "REPLAYED"
			if s.Requeue {
				s.State[m[1]+"-r"] = "PENDING"
			}
			if s.DropAnswer {
				s.DropAnswer = false
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.Close()
				return
			}
			JSON(w, http.StatusAccepted, map[string]any{"accepted": true, "deadLetterId": m[1]})
		}
	case r.Method == http.MethodPost && resolve != nil:
		if _, ok := s.State[resolve[1]]; !ok {
			JSON(w, http.StatusNotFound, map[string]any{"error": "Dead letter not found"})
			return
		}
		s.State[resolve[1]] = "RESOLVED"
		JSON(w, http.StatusOK, map[string]any{"resolved": true, "deadLetterId": resolve[1]})
	default:
		JSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "Method Not Allowed"})
	}
}

// JSON answers as ObserveCommand's sendJson does.
func JSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// list answers GET /api/dead-letters (see the package doc).
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := "PENDING"
	if v := q.Get("state"); v != "" {
		state = strings.ToUpper(v)
		if state != "ALL" && state != "PENDING" && state != "RESOLVED" && state != "REPLAYED" {
			JSON(w, http.StatusBadRequest, map[string]any{"error": "Invalid state '" + v + "'. Allowed: PENDING, RESOLVED, REPLAYED, ALL"})
			return
		}
	}
	page, size := 0, 20
	if v, err := strconv.Atoi(q.Get("page")); err == nil {
		page = v
	}
	if v, err := strconv.Atoi(q.Get("size")); err == nil {
		size = min(100, v)
	}
	all := make([]string, 0, len(s.State))
	for id := range s.State {
		all = append(all, id)
	}
	sort.Strings(all)
	failedAt := func(id string) time.Time {
		if at, ok := s.Failed[id]; ok {
			return at
		}
		return time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC).Add(time.Duration(sort.SearchStrings(all, id)) * time.Second)
	}
	var ids []string
	for id, st := range s.State {
		if state == "ALL" || state == st {
			ids = append(ids, id)
		}
	}
	// ORDER BY failed_at DESC: ties in one fixed order (by id), as a
	// database answers the same query with the same plan; the map's own
	// order would differ from one request to the next.
	sort.Strings(ids)
	sort.SliceStable(ids, func(i, j int) bool { return failedAt(ids[i]).After(failedAt(ids[j])) })
	items := []map[string]any{}
	for i := page * size; i < len(ids) && i < (page+1)*size; i++ {
		id := ids[i]
		var reason any
		if s.State[id] == "RESOLVED" {
			reason = "resolved by a person"
		}
		items = append(items, map[string]any{"id": id, "executionId": "exec-" + id, "goal": "sync crm", "context": map[string]any{"topic": "tool.crm.sync"},
			"failureCode": "STEP_FAILED", "failureMessage": "step crm.sync timed out", "failedAt": failedAt(id).Format(time.RFC3339Nano),
			"reviewState": s.State[id], "resolveReason": reason})
	}
	JSON(w, http.StatusOK, map[string]any{"size": size, "items": items, "page": page})
}
