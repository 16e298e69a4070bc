package nexora

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeServer answers the dead-letter routes as Nexora's observability
// server does (iamvirul/nexora nexora-cli ObserveCommand.java; records
// from DeadLetterRecord.java; order from JdbcExecutionStore.findDeadLetters:
// WHERE review_state = ? ORDER BY failed_at DESC LIMIT ? OFFSET ?, state
// ALL for every record): GET /api/dead-letters?state=&page=&size= (size
// capped at 100), POST /api/dead-letters/{id}/resolve {"reason"} (200 and
// RESOLVED; 409 when not PENDING; 404 when unknown), POST
// /api/dead-letters/{id}/replay (202 {"accepted": true}; 409; 404).
// NEXORA_TOKEN is checked as a bearer token.
type fakeServer struct {
	*httptest.Server
	token  string
	mu     sync.Mutex
	state  map[string]string
	failed map[string]time.Time
}

func newFakeServer(t *testing.T, token string, ids ...string) *fakeServer {
	f := &fakeServer{token: token, state: map[string]string{}, failed: map[string]time.Time{}}
	newest := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	for i, id := range ids {
		f.state[id], f.failed[id] = "PENDING", newest.Add(-time.Duration(i)*time.Minute)
	}
	act := regexp.MustCompile(`^/api/dead-letters/([^/]+)/(resolve|replay)$`)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.Method == http.MethodGet && r.URL.Path == "/api/dead-letters" {
			f.list(w, r)
			return
		}
		m := act.FindStringSubmatch(r.URL.EscapedPath())
		if m == nil || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		id, _ := url.PathUnescape(m[1])
		switch st, ok := f.state[id]; {
		case !ok:
			w.WriteHeader(http.StatusNotFound)
		case st != "PENDING":
			w.WriteHeader(http.StatusConflict)
		case m[2] == "resolve":
			f.state[id] = "RESOLVED"
			w.WriteHeader(http.StatusOK)
		default:
			f.state[id] = "REPLAYED"
			w.WriteHeader(http.StatusAccepted)
			_ = json.NewEncoder(w).Encode(map[string]any{"accepted": true, "deadLetterId": id})
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, _ := strconv.Atoi(q.Get("page"))
	size, _ := strconv.Atoi(q.Get("size"))
	if size <= 0 || size > 100 {
		size = 100
	}
	var ids []string
	for id, st := range f.state {
		if q.Get("state") == "ALL" || st == q.Get("state") {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return f.failed[ids[i]].After(f.failed[ids[j]]) })
	items := []map[string]any{}
	for i := page * size; i < len(ids) && i < (page+1)*size; i++ {
		id := ids[i]
		items = append(items, map[string]any{"id": id, "executionId": "ex-" + id, "goal": "g", "failureCode": "TIMEOUT",
			"failureMessage": "timed out", "failedAt": f.failed[id].Format(time.RFC3339), "reviewState": f.state[id]})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"items": items, "page": page, "size": size})
}

func (f *fakeServer) holds(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state[id] == "PENDING"
}
