package replay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
// core/controlplane/gateway handlers_dlq.go): X-API-Key and X-Tenant-ID
// authenticate; POST /api/v1/dlq/{job_id}/retry on an entry in the DLQ
// creates job <job_id>-retry-<8 hex>, deletes the DLQ entry and answers
// 200 {"job_id": NEW}; 404 when the entry is not in the DLQ.
type fakeCordum struct {
	*httptest.Server
	mu      sync.Mutex
	dlq     map[string]bool
	retries map[string]int // POSTs per job id, found or not
	order   []string       // listing order, fixed at the first page
	// dropAfterDelete: the next retry deletes the entry, then the
	// connection drops before the answer.
	dropAfterDelete bool
	fail            int // answer this many requests 503 first
}

func newFakeCordum(t *testing.T, ids ...string) *fakeCordum {
	f := &fakeCordum{dlq: map[string]bool{}, retries: map[string]int{}}
	for _, id := range ids {
		f.dlq[id] = true
	}
	retry := regexp.MustCompile(`^/api/v1/dlq/([^/]+)/retry$`)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != testCordumKey || r.Header.Get("X-Tenant-ID") != "default" {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/api/v1/dlq/page" {
			f.page(w, r)
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
		if f.fail > 0 {
			f.fail--
			http.Error(w, `{"error":"unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		if !f.dlq[m[1]] {
			http.Error(w, `{"error":"dlq entry not found"}`, http.StatusNotFound)
			return
		}
		delete(f.dlq, m[1])
		if f.dropAfterDelete {
			// The retry happened but its answer is lost.
			f.dropAfterDelete = false
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"job_id": m[1] + "-retry-" + hex.EncodeToString(b)})
	}))
	t.Cleanup(f.Close)
	return f
}

// page lists the DLQ as GET /api/v1/dlq/page does: {"items", "next_cursor"},
// the cursor an offset into the ids in order, absent on the last page.
func (f *fakeCordum) page(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// The cursor is a position in a fixed order (Cordum pages dlq:index, a
	// sorted set, by score), so entries deleted meanwhile shift nothing.
	if f.order == nil {
		for id := range f.dlq {
			f.order = append(f.order, id)
		}
		sort.Strings(f.order)
	}
	start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	limit = min(limit, 2) // small pages, so paging is exercised
	out := map[string]any{"items": []map[string]any{}}
	var items []map[string]any
	i := start
	for ; i < len(f.order) && len(items) < limit; i++ {
		if !f.dlq[f.order[i]] {
			continue
		}
		items = append(items, map[string]any{"job_id": f.order[i], "topic": "tool.email.send", "status": "JOB_STATUS_FAILED",
			"reason_code": "pool_overloaded", "reason": "pool email overloaded", "attempts": 4, "created_at": "2026-11-20T10:00:00Z"})
	}
	if items != nil {
		out["items"] = items
	}
	if i < len(f.order) {
		out["next_cursor"] = i
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (f *fakeCordum) calls(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.retries[id]
}

// fakeNexora behaves as Nexora's observability server does
// (iamvirul/nexora ObserveCommand.java, DeadLetterRecord.java): POST
// /api/dead-letters/{id}/replay answers 202 {"accepted":true,
// "deadLetterId"} and marks a PENDING record REPLAYED; 409 when the
// record is not PENDING; 404 when unknown.
type fakeNexora struct {
	*httptest.Server
	mu      sync.Mutex
	state   map[string]string
	replays map[string]int
}

func newFakeNexora(t *testing.T, states map[string]string) *fakeNexora {
	f := &fakeNexora{state: states, replays: map[string]int{}}
	replay := regexp.MustCompile(`^/api/dead-letters/([^/]+)/replay$`)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testNexoraTok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/api/dead-letters" {
			f.list(w, r)
			return
		}
		m := replay.FindStringSubmatch(r.URL.Path)
		if r.Method != http.MethodPost || m == nil {
			http.NotFound(w, r)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.replays[m[1]]++
		st, ok := f.state[m[1]]
		switch {
		case !ok:
			w.WriteHeader(http.StatusNotFound)
		case st != "PENDING":
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":"dead letter is ` + st + `"}`))
		default:
			f.state[m[1]] = "REPLAYED"
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"deadLetterId":"` + m[1] + `","accepted":true}`))
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// list answers GET /api/dead-letters?state=&page=&size= with
// {"items","page","size"} (keys in another order than documented).
func (f *fakeNexora) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := r.URL.Query()
	page, _ := strconv.Atoi(q.Get("page"))
	size, _ := strconv.Atoi(q.Get("size"))
	size = min(size, 100)
	var ids []string
	for id, st := range f.state {
		if q.Get("state") == "ALL" || q.Get("state") == st {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	items := []map[string]any{}
	for i := page * size; i < len(ids) && i < (page+1)*size; i++ {
		items = append(items, map[string]any{"id": ids[i], "reviewState": f.state[ids[i]], "failureCode": "STEP_FAILED"})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"size": size, "items": items, "page": page})
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
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	rec := func() *Reconciler {
		lr, err := NewLiveRouter(NewRulesRouter(b.engine.Rules, nil), false, CredentialsFromEnv(os.Getenv), src)
		if err != nil {
			t.Fatal(err)
		}
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
