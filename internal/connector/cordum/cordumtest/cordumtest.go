// Package cordumtest is the one fake of Cordum's API gateway for tests,
// the DLQ routes as the gateway answers them (finmaster1/cordum
// core/controlplane/gateway/handlers_dlq.go at 8b14b62, handlers
// handleListDLQPage, handleDeleteDLQ, handleRetryDLQ; writeErrorJSON's
// {"error": MSG}). It is written from those handlers, not copied.
//
//   - X-API-Key authenticates (Key); without TenantOf every job is tenant
//     "default" and X-Tenant-ID must say so.
//   - GET /api/v1/dlq/page?limit=&cursor=: limit defaults to 100 and is
//     clamped to Ceiling (clampListLimit, maxListLimit 500); the cursor,
//     in any unit, is cut to whole seconds and is inclusive
//     (normalizeTimestampSecondsUpper); entries come newest first by
//     their index score, created_at in seconds (DLQStore.ListByScore:
//     ZREVRANGEBYSCORE max=cursor, equal scores in reverse member order);
//     next_cursor is the last entry's created_at in microseconds minus
//     one on a full page, null otherwise (and after a last entry without
//     created_at); items is [] when there are none.
//   - With TenantOf, a page takes `limit` ids by score, then drops other
//     tenants' jobs and those whose job metadata expired (tenant "",
//     job_store.go:131), and sends next_cursor only when the page it kept
//     is still full; retry and delete answer 403 "tenant access denied"
//     for another tenant's job (requireTenantAccess).
//   - DELETE /api/v1/dlq/{job_id}: 204, whether or not the entry was there.
//   - POST /api/v1/dlq/{job_id}/retry: 404 "dlq entry not found" for an
//     entry not in the DLQ; else creates job <job_id>-retry-<8 hex>,
//     deletes the DLQ entry and answers 200 {"job_id": NEW}.
//
// Its knobs (Fail, Drops, Keep, Requeue, ...) make the gateway misbehave
// as it can; set them, and read its records, under Mu once it serves.
package cordumtest

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
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

// Gateway is a fake Cordum gateway serving the DLQ routes.
type Gateway struct {
	*httptest.Server
	// Key is the X-API-Key it takes.
	Key string
	Mu  sync.Mutex
	// DLQ holds the job ids in the DLQ; Created is each entry's
	// created_at, its index score.
	DLQ     map[string]bool
	Created map[string]time.Time
	// Retries counts POSTs of .../retry per job id, found or not; Deletes
	// DELETEs per job id.
	Retries map[string]int
	Deletes map[string]int
	// RetriedAs is the X-Tenant-ID of each job's last retry; As lists
	// "METHOD as TENANT" for every retry and delete of a job.
	RetriedAs map[string]string
	As        map[string][]string
	// Requests counts every request, answered or refused.
	Requests int
	// Ceiling is the page ceiling, maxListLimit (500); tests lower it so
	// that a few entries span pages.
	Ceiling int
	// DropAfterDelete: the next retry deletes the entry, then the
	// connection drops before the answer. Drops: the answers of this many
	// retries drop so.
	DropAfterDelete bool
	Drops           int
	// Fail answers this many retries 503 "dlq, job, or memory store
	// unavailable" first.
	Fail int
	// Requeue: the job a retry creates fails again, and the scheduler
	// dead-letters it under its own id (scheduler/engine.go:3066-3085 at
	// e00450ed), a second newer.
	Requeue bool
	// ReasonCode is every listed entry's reason_code (default
	// pool_overloaded).
	ReasonCode string
	// Keep: a retry answers 200 but its delete of the DLQ entry fails and
	// is only logged (handlers_dlq.go "dlq delete after retry failed"):
	// the entry stays.
	Keep bool
	// TenantOf, when set, is each job's tenant ("" when its job metadata
	// expired). nil: every job is tenant "default".
	TenantOf map[string]string
	// Intercept, when set, sees every request first (after counting it);
	// true: it answered it.
	Intercept func(w http.ResponseWriter, r *http.Request) bool
}

// New starts a gateway taking key, its DLQ holding ids: the first failed
// last, one a second, half-way into it, so that the cursor's whole second
// lists a page's last entry again.
func New(t testing.TB, key string, ids ...string) *Gateway {
	g := &Gateway{Key: key, DLQ: map[string]bool{}, Created: map[string]time.Time{}, Retries: map[string]int{},
		Deletes: map[string]int{}, RetriedAs: map[string]string{}, As: map[string][]string{}, Ceiling: 500}
	newest := time.Date(2026, 11, 20, 10, 0, 0, 500_000_000, time.UTC)
	for i, id := range ids {
		g.DLQ[id] = true
		g.Created[id] = newest.Add(-time.Duration(i) * time.Second)
	}
	g.Server = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.Close)
	return g
}

// Add puts job id in the DLQ, created at.
func (g *Gateway) Add(id string, at time.Time) {
	g.Mu.Lock()
	defer g.Mu.Unlock()
	g.DLQ[id], g.Created[id] = true, at
}

// Holds reports whether job id is in the DLQ.
func (g *Gateway) Holds(id string) bool {
	g.Mu.Lock()
	defer g.Mu.Unlock()
	return g.DLQ[id]
}

// Calls is how many retries of job id the gateway was sent.
func (g *Gateway) Calls(id string) int {
	g.Mu.Lock()
	defer g.Mu.Unlock()
	return g.Retries[id]
}

// RequestCount is how many requests the gateway was sent.
func (g *Gateway) RequestCount() int {
	g.Mu.Lock()
	defer g.Mu.Unlock()
	return g.Requests
}

var (
	retryPath = regexp.MustCompile(`^/api/v1/dlq/([^/]+)/retry$`)
	entryPath = regexp.MustCompile(`^/api/v1/dlq/([^/]+)$`)
)

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request) {
	g.Mu.Lock()
	defer g.Mu.Unlock()
	g.Requests++
	if g.Intercept != nil && g.Intercept(w, r) {
		return
	}
	tenant := r.Header.Get("X-Tenant-ID")
	if r.Header.Get("X-API-Key") != g.Key || tenant == "" || g.TenantOf == nil && tenant != "default" {
		Error(w, http.StatusUnauthorized, "unauthorized")
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/api/v1/dlq/page" {
		g.page(w, r)
		return
	}
	if d := entryPath.FindStringSubmatch(r.URL.EscapedPath()); r.Method == http.MethodDelete && d != nil {
		id := pathID(d[1])
		g.Deletes[id]++
		g.As[id] = append(g.As[id], r.Method+" as "+tenant)
		if !g.allowed(id, tenant) {
			Error(w, http.StatusForbidden, "tenant access denied")
			return
		}
		delete(g.DLQ, id)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	m := retryPath.FindStringSubmatch(r.URL.EscapedPath())
	if r.Method != http.MethodPost || m == nil {
		http.NotFound(w, r)
		return
	}
	id := pathID(m[1])
	g.Retries[id]++
	g.RetriedAs[id] = tenant
	g.As[id] = append(g.As[id], r.Method+" as "+tenant)
	if !g.allowed(id, tenant) {
		Error(w, http.StatusForbidden, "tenant access denied")
		return
	}
	if g.Fail > 0 {
		g.Fail--
		Error(w, http.StatusServiceUnavailable, "dlq, job, or memory store unavailable")
		return
	}
	if !g.DLQ[id] {
		Error(w, http.StatusNotFound, "dlq entry not found")
		return
	}
	if !g.Keep {
		delete(g.DLQ, id)
	}
	if g.DropAfterDelete || g.Drops > 0 {
		// The retry happened but its answer is lost.
		g.DropAfterDelete = false
		g.Drops = max(g.Drops-1, 0)
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	newID := id + "-retry-" + hex.EncodeToString(b)
	if g.Requeue {
		g.DLQ[newID] = true
		g.Created[newID] = g.Created[id].Add(time.Second)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"job_id": newID})
}

// allowed is the gateway's requireTenantAccess for a job.
func (g *Gateway) allowed(id, tenant string) bool {
	if g.TenantOf == nil {
		return tenant == "default"
	}
	return g.TenantOf[id] != "" && g.TenantOf[id] == tenant
}

func pathID(escaped string) string {
	id, err := url.PathUnescape(escaped)
	if err != nil {
		return escaped
	}
	return id
}

// Error answers as the gateway's writeErrorJSON does.
func Error(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// page lists the DLQ as GET /api/v1/dlq/page does (see the package doc).
func (g *Gateway) page(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v > 0 {
		limit = v
	}
	limit = min(limit, g.Ceiling)
	maxSec := int64(1 << 62) // no cursor: now
	if v, err := strconv.ParseInt(r.URL.Query().Get("cursor"), 10, 64); err == nil && v > 0 {
		maxSec = v
		for maxSec > 1e10 { // milli-, micro- or nanoseconds to seconds
			maxSec /= 1000
		}
	}
	var ids []string
	for id := range g.DLQ {
		if g.Created[id].Unix() <= maxSec {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := g.Created[ids[i]].Unix(), g.Created[ids[j]].Unix()
		return a > b || a == b && ids[i] > ids[j]
	})
	ids = ids[:min(len(ids), limit)]
	if g.TenantOf != nil {
		kept := ids[:0:0]
		for _, id := range ids {
			if g.allowed(id, r.Header.Get("X-Tenant-ID")) {
				kept = append(kept, id)
			}
		}
		ids = kept
	}
	items := []map[string]any{}
	for _, id := range ids {
		items = append(items, map[string]any{"job_id": id, "topic": "tool.email.send", "status": "JOB_STATUS_FAILED",
			"reason_code": cmp.Or(g.ReasonCode, "pool_overloaded"), "reason": "pool email overloaded", "attempts": 4,
			"created_at": g.Created[id].Format(time.RFC3339Nano)})
	}
	var next *int64
	if len(ids) == limit && !g.Created[ids[len(ids)-1]].IsZero() {
		nc := g.Created[ids[len(ids)-1]].UnixMicro() - 1
		next = &nc
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"items": items, "next_cursor": next})
}
