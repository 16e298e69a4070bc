package cordum

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

// fakeGateway answers the DLQ routes as Cordum's gateway does
// (finmaster1/cordum@03790ac7f816 core/controlplane/gateway/handlers_dlq.go):
// X-API-Key authenticates; GET /api/v1/dlq/page?limit=&cursor= lists the
// entries newest first from dlq:index (scored by created_at) at or below
// the cursor, with next_cursor the last entry's created_at in seconds
// minus one on a full page (handleListDLQPage); DELETE /api/v1/dlq/{id}
// answers 204 (handleDeleteDLQ, whether or not the entry was there);
// POST /api/v1/dlq/{id}/retry answers 404 "dlq entry not found" for an
// entry not in the DLQ, else deletes it and answers {"job_id": NEW}
// (handleRetryDLQ). Errors are {"error": MSG}.
//
// With tenantOf set, jobs belong to tenants as the newest gateway keeps
// them (finmaster1/cordum@e00450ed): a page takes `limit` ids by score,
// then drops the jobs of other tenants than X-Tenant-ID and those whose
// job metadata expired (tenant "", job_store.go:131), and sends
// next_cursor only when the page it kept is still full
// (handlers_dlq.go:64-88); retry and delete answer 403 "tenant access
// denied" for another tenant's job (requireTenantAccess). A cursor in
// milli-, micro- or nanoseconds is taken back to whole seconds, as the
// newest gateway's normalizeTimestampSecondsUpper does.
type fakeGateway struct {
	*httptest.Server
	key     string
	mu      sync.Mutex
	created map[string]time.Time
	// tenantOf is each job's tenant; nil: tenants are not checked.
	tenantOf map[string]string
	// as records the X-Tenant-ID of each retry and delete, by job id.
	as map[string][]string
}

// allowed is the gateway's requireTenantAccess for a job.
func (f *fakeGateway) allowed(id string, r *http.Request) bool {
	return f.tenantOf == nil || f.tenantOf[id] != "" && f.tenantOf[id] == r.Header.Get("X-Tenant-ID")
}

func newFakeGateway(t *testing.T, key string, ids ...string) *fakeGateway {
	f := &fakeGateway{key: key, created: map[string]time.Time{}, as: map[string][]string{}}
	newest := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	for i, id := range ids {
		f.created[id] = newest.Add(-time.Duration(i) * time.Minute)
	}
	one := regexp.MustCompile(`^/api/v1/dlq/([^/]+)(/retry)?$`)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != f.key {
			gatewayError(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.Method == http.MethodGet && r.URL.Path == "/api/v1/dlq/page" {
			f.page(w, r)
			return
		}
		m := one.FindStringSubmatch(r.URL.EscapedPath())
		if m != nil {
			id := pathID(m[1])
			f.as[id] = append(f.as[id], r.Method+" as "+r.Header.Get("X-Tenant-ID"))
			if !f.allowed(id, r) {
				gatewayError(w, http.StatusForbidden, "tenant access denied")
				return
			}
		}
		switch {
		case m != nil && r.Method == http.MethodDelete && m[2] == "":
			delete(f.created, pathID(m[1]))
			w.WriteHeader(http.StatusNoContent)
		case m != nil && r.Method == http.MethodPost && m[2] == "/retry":
			id := pathID(m[1])
			if _, ok := f.created[id]; !ok {
				gatewayError(w, http.StatusNotFound, "dlq entry not found")
				return
			}
			delete(f.created, id)
			_ = json.NewEncoder(w).Encode(map[string]string{"job_id": id + "-retry-0badc0de"})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func pathID(escaped string) string {
	id, err := url.PathUnescape(escaped)
	if err != nil {
		return escaped
	}
	return id
}

func (f *fakeGateway) page(w http.ResponseWriter, r *http.Request) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 500) // clampListLimit: maxListLimit
	cursor, _ := strconv.ParseInt(r.URL.Query().Get("cursor"), 10, 64)
	for cursor > 1e10 {
		cursor /= 1000
	}
	type item struct {
		JobID     string    `json:"job_id"`
		Topic     string    `json:"topic"`
		Status    string    `json:"status"`
		Reason    string    `json:"reason"`
		CreatedAt time.Time `json:"created_at"`
	}
	var items []item
	for id, at := range f.created {
		if cursor == 0 || at.Unix() <= cursor {
			items = append(items, item{JobID: id, Topic: "job.default", Status: "JOB_STATUS_TIMEOUT", Reason: "timeout", CreatedAt: at})
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].CreatedAt.After(items[j].CreatedAt) })
	if len(items) > limit {
		items = items[:limit]
	}
	if f.tenantOf != nil {
		kept := items[:0:0]
		for _, it := range items {
			if f.allowed(it.JobID, r) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	var next *int64
	if len(items) == limit {
		nc := items[len(items)-1].CreatedAt.Unix() - 1
		next = &nc
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"items": items, "next_cursor": next})
}

func (f *fakeGateway) holds(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.created[id]
	return ok
}

func gatewayError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
