package replay

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

const (
	testCordumKey = "ck-secret-7f3a9b"
	testNexoraTok = "nx-secret-c41d2e"
)

// fakeCordum behaves as Cordum's gateway does for the DLQ (cordum-io/cordum
// core/controlplane/gateway/handlers_dlq.go at 51b6141): X-API-Key and
// X-Tenant-ID authenticate; POST /api/v1/dlq/{job_id}/retry on an entry in
// the DLQ creates job <job_id>-retry-<8 hex>, deletes the DLQ entry and
// answers 200 {"job_id": NEW} (:123-238); 404 {"error": "dlq entry not
// found"} when the entry is not in the DLQ (:143-147); errors are
// writeErrorJSON's {"error": MSG}.
type fakeCordum struct {
	*httptest.Server
	mu      sync.Mutex
	dlq     map[string]bool
	created map[string]time.Time // each entry's created_at, its index score
	retries map[string]int       // POSTs per job id, found or not
	// ceiling is the gateway's page ceiling: maxListLimit, 500
	// (gateway/helpers.go); tests lower it so a few entries span pages.
	ceiling int
	// dropAfterDelete: the next retry deletes the entry, then the
	// connection drops before the answer.
	dropAfterDelete bool
	drops           int // drop the answers of this many retries, as dropAfterDelete
	fail            int // answer this many requests 503 first
	// requeue: the job a retry creates fails again, and the scheduler
	// dead-letters it under its own id (finmaster1/cordum
	// scheduler/engine.go:3066-3085 at e00450ed), a second newer.
	requeue bool
	// reasonCode is every listed entry's reason_code (default
	// pool_overloaded).
	reasonCode string
	// keep: a retry answers 200 but its delete of the DLQ entry fails and
	// is only logged (handlers_dlq.go:231-233 at e00450ed): the entry stays.
	keep bool
	// deletes counts DELETE /api/v1/dlq/{job_id} per id (204; 404 when
	// the entry is not in the DLQ, handleDeleteDLQ).
	deletes map[string]int
	// tenantOf, when set, is each job's tenant ("" when its job metadata
	// expired, job_store.go:131 at e00450ed): the page endpoint takes
	// `limit` ids, drops those of other tenants and the expired ones, and
	// sends next_cursor only when the page it kept is still full
	// (handlers_dlq.go:64-88 at e00450ed; 03790ac7 handleListDLQPage);
	// retry and delete answer 403 "tenant access denied" for another
	// tenant's job. nil: every job is tenant "default".
	tenantOf map[string]string
	// retriedAs records the X-Tenant-ID of each retry, by job id.
	retriedAs map[string]string
}

// tenantAllowed is the gateway's requireTenantAccess for a job.
func (f *fakeCordum) tenantAllowed(id, tenant string) bool {
	if f.tenantOf == nil {
		return tenant == "default"
	}
	return f.tenantOf[id] != "" && f.tenantOf[id] == tenant
}

func newFakeCordum(t *testing.T, ids ...string) *fakeCordum {
	f := &fakeCordum{dlq: map[string]bool{}, created: map[string]time.Time{}, retries: map[string]int{}, deletes: map[string]int{},
		retriedAs: map[string]string{}, ceiling: 500}
	// The first id failed last; one a second, half-way into it, so that
	// the cursor's whole second lists a page's last entry again.
	newest := time.Date(2026, 11, 20, 10, 0, 0, 500_000_000, time.UTC)
	for i, id := range ids {
		f.dlq[id] = true
		f.created[id] = newest.Add(-time.Duration(i) * time.Second)
	}
	retry := regexp.MustCompile(`^/api/v1/dlq/([^/]+)/retry$`)
	del := regexp.MustCompile(`^/api/v1/dlq/([^/]+)$`)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != testCordumKey || r.Header.Get("X-Tenant-ID") == "" ||
			f.tenantOf == nil && r.Header.Get("X-Tenant-ID") != "default" {
			cordumError(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/api/v1/dlq/page" {
			f.page(w, r)
			return
		}
		if d := del.FindStringSubmatch(r.URL.Path); r.Method == http.MethodDelete && d != nil {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.deletes[d[1]]++
			if f.tenantOf != nil && !f.tenantAllowed(d[1], r.Header.Get("X-Tenant-ID")) {
				cordumError(w, http.StatusForbidden, "tenant access denied")
				return
			}
			delete(f.dlq, d[1])
			w.WriteHeader(http.StatusNoContent)
			return
		}
		m := retry.FindStringSubmatch(r.URL.Path)
		if r.Method != http.MethodPost || m == nil {
			http.NotFound(w, r)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.retries[m[1]]++
		f.retriedAs[m[1]] = r.Header.Get("X-Tenant-ID")
		if f.tenantOf != nil && !f.tenantAllowed(m[1], r.Header.Get("X-Tenant-ID")) {
			cordumError(w, http.StatusForbidden, "tenant access denied")
			return
		}
		if f.fail > 0 {
			f.fail--
			cordumError(w, http.StatusServiceUnavailable, "dlq, job, or memory store unavailable")
			return
		}
		if !f.dlq[m[1]] {
			cordumError(w, http.StatusNotFound, "dlq entry not found")
			return
		}
		if !f.keep {
			delete(f.dlq, m[1])
		}
		if f.dropAfterDelete || f.drops > 0 {
			// The retry happened but its answer is lost.
			f.dropAfterDelete = false
			f.drops = max(f.drops-1, 0)
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		newID := m[1] + "-retry-" + hex.EncodeToString(b)
		if f.requeue {
			f.dlq[newID] = true
			f.created[newID] = f.created[m[1]].Add(time.Second)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"job_id": newID})
	}))
	t.Cleanup(f.Close)
	return f
}

// cordumError answers as the gateway's writeErrorJSON does.
func cordumError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// page lists the DLQ as GET /api/v1/dlq/page does (handlers_dlq.go:46-95):
// limit defaults to 100 and is clamped to the ceiling; the cursor, in any
// unit, is cut to whole seconds and is inclusive; entries come newest
// first by their index score, created_at in seconds (DLQStore.ListByScore,
// core/infra/store/dlq_store.go: ZREVRANGEBYSCORE max=cursor); next_cursor
// is the last entry's created_at in microseconds minus one on a full page,
// null otherwise; items is [] when there are none.
func (f *fakeCordum) page(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	limit := 100
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v > 0 {
		limit = v
	}
	limit = min(limit, f.ceiling)
	maxSec := int64(1 << 62) // no cursor: now
	if v, err := strconv.ParseInt(r.URL.Query().Get("cursor"), 10, 64); err == nil && v > 0 {
		maxSec = v
		for maxSec > 1e10 { // milli-, micro- or nanoseconds to seconds
			maxSec /= 1000
		}
	}
	var ids []string
	for id := range f.dlq {
		if f.created[id].Unix() <= maxSec {
			ids = append(ids, id)
		}
	}
	// By score, newest first; equal scores in reverse order of the member,
	// as ZREVRANGEBYSCORE gives them.
	sort.Slice(ids, func(i, j int) bool {
		a, b := f.created[ids[i]].Unix(), f.created[ids[j]].Unix()
		return a > b || a == b && ids[i] > ids[j]
	})
	ids = ids[:min(len(ids), limit)]
	// The last of the ids taken, before the tenant filter: the gateway's
	// cursor comes from the page it keeps, so it has none when the
	// filter shortened it.
	if f.tenantOf != nil {
		kept := ids[:0:0]
		for _, id := range ids {
			if f.tenantAllowed(id, r.Header.Get("X-Tenant-ID")) {
				kept = append(kept, id)
			}
		}
		ids = kept
	}
	items := []map[string]any{}
	for _, id := range ids {
		code := cmp.Or(f.reasonCode, "pool_overloaded")
		items = append(items, map[string]any{"job_id": id, "topic": "tool.email.send", "status": "JOB_STATUS_FAILED",
			"reason_code": code, "reason": "pool email overloaded", "attempts": 4,
			"created_at": f.created[id].Format(time.RFC3339Nano)})
	}
	// No cursor after a page whose last entry has no created_at
	// (handlers_dlq.go:85): such entries score lowest, and the gateway
	// cannot page past them.
	var next *int64
	if len(ids) == limit && !f.created[ids[len(ids)-1]].IsZero() {
		nc := f.created[ids[len(ids)-1]].UnixMicro() - 1
		next = &nc
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"items": items, "next_cursor": next})
}

func (f *fakeCordum) calls(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.retries[id]
}

// fakeNexora behaves as Nexora's observability server does
// (iamvirul/nexora nexora-cli ObserveCommand.java at 003de5b, the
// "/api/dead-letters/" and "/api/dead-letters" contexts;
// DeadLetterRecord.java): POST /api/dead-letters/{id}/replay answers 202
// {"accepted":true,"deadLetterId"} and marks a PENDING record REPLAYED,
// 404 {"error":"Dead letter not found"} for an unknown id, 409
// {"error":"Dead letter is not in PENDING state"} for one that is not;
// POST .../resolve marks any known record RESOLVED with its reason and
// answers 200 {"resolved":true,"deadLetterId"} (404 when unknown); any
// other request under /api/dead-letters/ is 405 {"error":"Method Not
// Allowed"}. The bearer token is replayctl's (NEXORA_TOKEN), for a server
// behind a proxy that checks it: Nexora itself checks none.
type fakeNexora struct {
	*httptest.Server
	mu      sync.Mutex
	state   map[string]string
	replays map[string]int
	// dropAnswer: the next replay is done (REPLAYED) but the connection
	// drops before its answer.
	dropAnswer bool
	// requeue: the execution a replay submits fails again, and Nexora
	// writes a new PENDING record with a new UUID and the same goal and
	// context (ObserveCommand.java:197-201, ExecutionEngine.java:145-158 at
	// 8ef2c3ea); its id is the replayed one's with "-r" appended, so that
	// it sorts, and so fails, later.
	requeue bool
}

func newFakeNexora(t *testing.T, states map[string]string) *fakeNexora {
	f := &fakeNexora{state: states, replays: map[string]int{}}
	replay := regexp.MustCompile(`^/api/dead-letters/(.+)/replay$`)
	resolvePath := regexp.MustCompile(`^/api/dead-letters/(.+)/resolve$`)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testNexoraTok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/api/dead-letters" {
			f.list(w, r)
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/api/dead-letters/") {
			http.NotFound(w, r)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		m := replay.FindStringSubmatch(r.URL.Path)
		resolve := resolvePath.FindStringSubmatch(r.URL.Path)
		switch {
		case r.Method == http.MethodPost && m != nil:
			f.replays[m[1]]++
			st, ok := f.state[m[1]]
			switch {
			case !ok:
				nexoraJSON(w, http.StatusNotFound, map[string]any{"error": "Dead letter not found"})
			case st != "PENDING":
				nexoraJSON(w, http.StatusConflict, map[string]any{"error": "Dead letter is not in PENDING state"})
			default:
				f.state[m[1]] = "REPLAYED"
				if f.requeue {
					f.state[m[1]+"-r"] = "PENDING"
				}
				if f.dropAnswer {
					f.dropAnswer = false
					conn, _, _ := w.(http.Hijacker).Hijack()
					conn.Close()
					return
				}
				nexoraJSON(w, http.StatusAccepted, map[string]any{"accepted": true, "deadLetterId": m[1]})
			}
		case r.Method == http.MethodPost && resolve != nil:
			if _, ok := f.state[resolve[1]]; !ok {
				nexoraJSON(w, http.StatusNotFound, map[string]any{"error": "Dead letter not found"})
				return
			}
			f.state[resolve[1]] = "RESOLVED"
			nexoraJSON(w, http.StatusOK, map[string]any{"resolved": true, "deadLetterId": resolve[1]})
		default:
			nexoraJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "Method Not Allowed"})
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// nexoraJSON answers as ObserveCommand's sendJson does.
func nexoraJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// list answers GET /api/dead-letters?state=&page=&size= as the server
// does: state PENDING by default, ALL for every state, another value 400;
// page 0 and size 20 by default, size at most 100; the records newest
// first by failedAt (JdbcExecutionStore.findDeadLetters: ORDER BY
// failed_at DESC LIMIT size OFFSET page*size); every DeadLetterRecord
// field; {"items","page","size"}, keys in any order (Map.of).
func (f *fakeNexora) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := r.URL.Query()
	state := "PENDING"
	if v := q.Get("state"); v != "" {
		state = strings.ToUpper(v)
		if state != "ALL" && state != "PENDING" && state != "RESOLVED" && state != "REPLAYED" {
			nexoraJSON(w, http.StatusBadRequest, map[string]any{"error": "Invalid state '" + v + "'. Allowed: PENDING, RESOLVED, REPLAYED, ALL"})
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
	// A record's failedAt: the ids in order failed one a second, the last
	// newest.
	all := make([]string, 0, len(f.state))
	for id := range f.state {
		all = append(all, id)
	}
	sort.Strings(all)
	failedAt := func(id string) time.Time {
		return time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC).Add(time.Duration(sort.SearchStrings(all, id)) * time.Second)
	}
	var ids []string
	for id, st := range f.state {
		if state == "ALL" || state == st {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return failedAt(ids[i]).After(failedAt(ids[j])) })
	items := []map[string]any{}
	for i := page * size; i < len(ids) && i < (page+1)*size; i++ {
		id := ids[i]
		failed := failedAt(id)
		var reason any
		if f.state[id] == "RESOLVED" {
			reason = "resolved by a person"
		}
		items = append(items, map[string]any{"id": id, "executionId": "exec-" + id, "goal": "sync crm", "context": map[string]any{"topic": "tool.crm.sync"},
			"failureCode": "STEP_FAILED", "failureMessage": "step crm.sync timed out", "failedAt": failed.Format(time.RFC3339Nano),
			"reviewState": f.state[id], "resolveReason": reason})
	}
	nexoraJSON(w, http.StatusOK, map[string]any{"size": size, "items": items, "page": page})
}

var testCreds = Credentials{CordumAPIKey: testCordumKey, CordumTenantID: "default", NexoraToken: testNexoraTok}

func req(id string) Request {
	return Request{Entry: &entry.Entry{ID: id}, Key: "k-" + id, Attempt: 1}
}

func noSecret(t *testing.T, what string, s string) {
	t.Helper()
	if strings.Contains(s, testCordumKey) || strings.Contains(s, testNexoraTok) {
		t.Errorf("%s contains a credential: %s", what, s)
	}
}

func TestCordumTargetOutcomes(t *testing.T) {
	f := newFakeCordum(t, "job_1")
	tg, err := NewCordumTarget(f.URL, 0, testCreds)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	res := tg.Dispatch(ctx, req("job_1"))
	if res.Outcome != Succeeded || !res.SourceUpdated || !regexp.MustCompile(`^job_1-retry-[0-9a-f]{8}$`).MatchString(res.NewJobID) {
		t.Fatalf("retry of a dead job: %+v", res)
	}
	// Cordum deleted the entry: a second retry is 404, handled elsewhere.
	if res := tg.Dispatch(ctx, req("job_1")); res.Outcome != HandledElsewhere || res.Status != 404 {
		t.Fatalf("retry of a gone job: %+v", res)
	}
	f.fail = 1
	if res := tg.Dispatch(ctx, req("job_x")); res.Outcome != Retry {
		t.Fatalf("503: %+v", res)
	}
	bad, _ := NewCordumTarget(f.URL, 0, Credentials{CordumAPIKey: "wrong-" + testCordumKey})
	res = bad.Dispatch(ctx, req("job_1"))
	if res.Outcome != Failed || res.Status != 401 || !strings.Contains(res.Detail, "credentials") {
		t.Fatalf("401: %+v", res)
	}
	noSecret(t, "401 detail", res.Detail)
}

func TestNexoraTargetOutcomes(t *testing.T) {
	f := newFakeNexora(t, map[string]string{"dl-1": "PENDING", "dl-2": "RESOLVED"})
	tg, err := NewNexoraTarget(f.URL, 0, testCreds)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if res := tg.Dispatch(ctx, req("dl-1")); res.Outcome != Succeeded || res.Status != 202 || !res.SourceUpdated {
		t.Fatalf("202: %+v", res)
	}
	for _, id := range []string{"dl-1", "dl-2"} { // now REPLAYED; RESOLVED by a person
		if res := tg.Dispatch(ctx, req(id)); res.Outcome != HandledElsewhere || res.Status != 409 {
			t.Fatalf("%s 409: %+v", id, res)
		}
	}
	if res := tg.Dispatch(ctx, req("dl-gone")); res.Outcome != HandledElsewhere || res.Status != 404 {
		t.Fatalf("404: %+v", res)
	}
	bad, _ := NewNexoraTarget(f.URL, 0, Credentials{NexoraToken: "nope"})
	if res := bad.Dispatch(ctx, req("dl-1")); res.Outcome != Failed || res.Status != 401 {
		t.Fatalf("401: %+v", res)
	}
}

func TestParseTarget(t *testing.T) {
	for spec, want := range map[string]string{
		"cordum:http://gw:8080":  "*replay.CordumTarget",
		"nexora:https://nx:9000": "*replay.NexoraTarget",
		"http://sink/replay":     "*replay.HTTPTarget",
	} {
		rt, err := ParseTarget(spec, "", testCreds)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if got := typeName(rt.Dispatcher); got != want {
			t.Errorf("%s: %s, want %s", spec, got, want)
		}
	}
	if _, err := ParseTarget("cordum:gw:8080", "", testCreds); err == nil {
		t.Error("cordum: without an http(s) URL accepted")
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *CordumTarget:
		return "*replay.CordumTarget"
	case *NexoraTarget:
		return "*replay.NexoraTarget"
	case *HTTPTarget:
		return "*replay.HTTPTarget"
	}
	return "?"
}

// TestReconcileThroughCordumExactlyOnce: entries from a Cordum DLQ file,
// replayed with --target cordum:URL, are retried through Cordum once each;
// the new job id is in the outcome's audit record; an entry Cordum no
// longer has ends resolved and is never retried; a second run calls
// nothing; credentials appear in no audit record.
func TestReconcileThroughCordumExactlyOnce(t *testing.T) {
	b := newBundle(t, baseRules)
	f := newFakeCordum(t, "job_a", "job_b") // job_c was retried from Cordum's dashboard
	var lines []string
	for _, id := range []string{"job_a", "job_b", "job_c"} {
		lines = append(lines, `{"job_id":"`+id+`","topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason_code":"pool_overloaded","reason":"pool email overloaded","attempts":4,"created_at":"2026-11-20T10:00:00Z"}`)
	}
	p := filepath.Join(b.dir, "cordum.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.Parse("cordum:" + p)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := ParseTarget("cordum:"+f.URL, "", testCreds)
	if err != nil {
		t.Fatal(err)
	}
	rec := func() *Reconciler {
		return &Reconciler{Engine: b.engine, Store: b.store, Clock: b.clock, Actor: "ops-bot", MaxParallel: 2,
			Router: NewRulesRouter(b.engine.Rules, rt)}
	}
	b.run(rec(), src)
	for _, id := range []string{"job_a", "job_b", "job_c"} {
		if n := f.calls(id); n != 1 {
			t.Errorf("%s: %d retry calls, want 1", id, n)
		}
	}
	if er := b.entry("cordum:job_a"); er.Status != store.StatusReplayed {
		t.Errorf("job_a: %s %q", er.Status, er.Reason)
	}
	if er := b.entry("cordum:job_c"); er.Status != store.StatusResolved || !strings.Contains(er.Reason, "no longer in the DLQ") {
		t.Errorf("job_c: %s %q", er.Status, er.Reason)
	}
	if v := b.ledger(b.entry("cordum:job_c").Entry.IdempotencyKey); v.State != triage.StateSucceeded {
		t.Errorf("job_c ledger %+v", v)
	}

	newJobs := map[string]string{}
	if err := audit.Each(context.Background(), b.store, audit.Query{}, func(r audit.Record) error {
		raw, _ := json.Marshal(r)
		noSecret(t, "audit record", string(raw))
		if r.Kind == audit.KindOutcome {
			var d struct {
				NewJobID string `json:"new_job_id"`
			}
			_ = json.Unmarshal(r.Detail, &d)
			newJobs[r.EntryID] = d.NewJobID
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(newJobs["job_a"], "job_a-retry-") || newJobs["job_c"] != "" {
		t.Errorf("new job ids in audit: %v", newJobs)
	}

	b.run(rec(), src)
	for _, id := range []string{"job_a", "job_b", "job_c"} {
		if n := f.calls(id); n != 1 {
			t.Errorf("second run: %s has %d retry calls, want 1", id, n)
		}
	}
}

// TestRulesTargetsCordumAndNexora: rules.yaml targets `cordum: {url}` and
// `nexora: {url}` route through the systems; a target naming two kinds,
// or a non-http URL, is a configuration error.
func TestRulesTargetsCordumAndNexora(t *testing.T) {
	rules, err := triage.ParseRules("rules.yaml", []byte(`version: v1
targets:
  - name: cordum-gw
    match: {source: cordum-redis}
    cordum: {url: "http://gw:8080", timeout: 5s}
  - name: nexora
    match: {source: nexora}
    nexora: {url: "http://nx:9000"}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := NewRulesRouter(rules, nil)
	for src, want := range map[string]string{entry.KindCordumRedis: "*replay.CordumTarget", entry.KindNexora: "*replay.NexoraTarget"} {
		rt, ok := r.Route(&entry.Entry{ID: "x", Source: src})
		if !ok || typeName(rt.Dispatcher) != want {
			t.Errorf("%s: routed to %s (%v), want %s", src, typeName(rt.Dispatcher), ok, want)
		}
	}
	for _, bad := range []string{
		"targets:\n  - cordum: {url: \"http://gw\"}\n    nexora: {url: \"http://nx\"}\n",
		"targets:\n  - cordum: {url: \"gw:8080\"}\n",
	} {
		if _, err := triage.ParseRules("rules.yaml", []byte("version: v1\n"+bad)); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}

// TestLiveCordumSourceReplaysThroughCordum: a live Cordum DLQ of several
// pages is read completely; with no --target every entry is retried through
// Cordum's own endpoint exactly once; Cordum then no longer lists them; a
// second run calls nothing.
func TestLiveCordumSourceReplaysThroughCordum(t *testing.T) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	b := newBundle(t, baseRules)
	ids := []string{"job_1", "job_2", "job_3", "job_4", "job_5"}
	f := newFakeCordum(t, ids...)
	f.ceiling = 2 // pages of two, each page's last entry listed again on the next
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	rec := func() *Reconciler {
		lr := NewOriginRouter(NewRulesRouter(b.engine.Rules, nil), false, CredentialsFromEnv(os.Getenv))
		return &Reconciler{Engine: b.engine, Store: b.store, Clock: b.clock, Actor: "ops-bot", MaxParallel: 2, Router: lr}
	}
	rep := b.run(rec(), src)
	if rep.Replays.Succeeded != len(ids) {
		t.Fatalf("replays %+v", rep.Replays)
	}
	for _, id := range ids {
		if n := f.calls(id); n != 1 {
			t.Errorf("%s: %d retry calls, want 1", id, n)
		}
		if er := b.entry("cordum:" + id); er.Status != store.StatusReplayed {
			t.Errorf("%s: %s %q", id, er.Status, er.Reason)
		}
	}
	f.mu.Lock()
	left := len(f.dlq)
	f.mu.Unlock()
	if left != 0 {
		t.Errorf("%d entries still in Cordum's DLQ", left)
	}
	b.run(rec(), src)
	for _, id := range ids {
		if n := f.calls(id); n != 1 {
			t.Errorf("second run: %s has %d retry calls", id, n)
		}
	}
}

// TestCordumOutcomeUnknownIsProbed: the retry reached Cordum (the entry
// was deleted and a job created) but its answer was lost: outcome_unknown.
// The next run reads Cordum's DLQ without a --probe flag, finds the entry
// gone, records the key committed and never calls retry again.
func TestCordumOutcomeUnknownIsProbed(t *testing.T) {
	b := newBundle(t, baseRules)
	f := newFakeCordum(t, "job_u", "job_v")
	f.dropAfterDelete = true
	var lines []string
	for _, id := range []string{"job_u"} {
		lines = append(lines, `{"job_id":"`+id+`","topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason_code":"pool_overloaded","reason":"x","attempts":4,"created_at":"2026-11-20T10:00:00Z"}`)
	}
	p := filepath.Join(b.dir, "cordum.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.Parse("cordum:" + p)
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := ParseTarget("cordum:"+f.URL, "", testCreds)
	rec := &Reconciler{Engine: b.engine, Store: b.store, Clock: b.clock, Actor: "ops-bot", Router: NewRulesRouter(b.engine.Rules, rt)}
	b.run(rec, src)
	if er := b.entry("cordum:job_u"); er.Status != store.StatusUnknown {
		t.Fatalf("after the lost answer: %s %q", er.Status, er.Reason)
	}
	rep := b.run(rec, src)
	if f.calls("job_u") != 1 {
		t.Fatalf("retry called %d times", f.calls("job_u"))
	}
	if rep.ProbedCommitted != 1 {
		t.Fatalf("report: probed committed %d", rep.ProbedCommitted)
	}
	if v := b.ledger(b.entry("cordum:job_u").Entry.IdempotencyKey); v.State != triage.StateSucceeded {
		t.Fatalf("ledger %+v", v)
	}
	// Still in the DLQ: the probe says not committed.
	if pr, _ := rt.Prober.(EntryProber).ProbeEntry(context.Background(), &entry.Entry{ID: "job_v"}); pr != ProbeNotCommitted {
		t.Fatalf("job_v probe %v", pr)
	}
}

// TestNexoraProbe reads reviewState: PENDING is not committed; REPLAYED,
// RESOLVED or gone is.
func TestNexoraProbe(t *testing.T) {
	states := map[string]string{"dl-p": "PENDING", "dl-r": "REPLAYED", "dl-s": "RESOLVED"}
	f := newFakeNexora(t, states)
	tg, _ := NewNexoraTarget(f.URL, 0, testCreds)
	for id, want := range map[string]ProbeResult{"dl-p": ProbeNotCommitted, "dl-r": ProbeCommitted, "dl-s": ProbeCommitted, "dl-gone": ProbeCommitted} {
		if pr, d := tg.ProbeEntry(context.Background(), &entry.Entry{ID: id}); pr != want {
			t.Errorf("%s: %v (%s), want %v", id, pr, d, want)
		}
	}
}

// TestCordumFullPageWithoutCursorIsNotTheEnd: the gateway sends
// next_cursor null after a full page whose last entry has no created_at
// (handlers_dlq.go:82-89 at 51b6141): such entries score lowest in
// dlq:index and it cannot page past them. Null was taken for the end of
// the DLQ: the probe answered "gone: committed" for a job still in it past
// that page, recording as done a retry that never happened, and a live
// read stopped there in silence. The probe now cannot tell; the read says
// where it stopped.
func TestCordumFullPageWithoutCursorIsNotTheEnd(t *testing.T) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	var ids []string
	for i := range 502 {
		ids = append(ids, fmt.Sprintf("job_%03d", i))
	}
	f := newFakeCordum(t, ids...)
	for _, id := range ids[498:] { // four entries without created_at
		f.created[id] = time.Time{}
	}
	tg, err := NewCordumTarget(f.URL, 0, testCreds)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Undated entries come in reverse order of the id: job_501 and job_500
	// fill the first page, job_499 and job_498 are past it.
	if pr, why := tg.ProbeEntry(ctx, &entry.Entry{ID: "job_498"}); pr != ProbeInconclusive {
		t.Errorf("job past the last page the gateway can reach: %v (%s), want inconclusive", pr, why)
	}
	if pr, why := tg.ProbeEntry(ctx, &entry.Entry{ID: "job_000"}); pr != ProbeNotCommitted {
		t.Errorf("job on the page: %v (%s)", pr, why)
	}
	f.mu.Lock()
	for _, id := range ids[1:4] {
		delete(f.dlq, id)
	}
	f.mu.Unlock()
	// 499 left: the page is short, null is the end, and a job not on it
	// is gone.
	if pr, why := tg.ProbeEntry(ctx, &entry.Entry{ID: "job_001"}); pr != ProbeCommitted {
		t.Errorf("deleted job on a DLQ the gateway lists whole: %v (%s)", pr, why)
	}

	f.mu.Lock()
	for _, id := range ids[1:4] {
		f.dlq[id] = true
	}
	f.mu.Unlock()
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var readErr error
	for _, err := range src.Entries(ctx) {
		if err != nil {
			readErr = err
			break
		}
		n++
	}
	if n != 500 || readErr == nil || !strings.Contains(readErr.Error(), "created_at") || !strings.Contains(readErr.Error(), "cordum-redis:") {
		t.Fatalf("read %d entries, then %v; want 500, then an error naming the way round", n, readErr)
	}
}
