package source

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/replayctl/replayctl/internal/connector/cordum"
	"github.com/replayctl/replayctl/internal/connector/httpout"
	"github.com/replayctl/replayctl/internal/entry"
)

const (
	liveCordumKey = "ck-live-5e1f"
	liveNexoraTok = "nx-live-9a7c"
)

// fakeGateway serves Cordum's paged DLQ as the gateway does (cordum-io/
// cordum core/controlplane/gateway handlers_dlq.go): GET
// /api/v1/dlq/page?limit=&cursor= answers {"items": [...], "next_cursor":
// N}, next_cursor absent on the last page; X-API-Key and X-Tenant-ID
// authenticate. Entries are DLQEntry records (core/infra/store/
// dlq_store.go). failOnce answers the first request for that cursor 503.
type fakeGateway struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	failOnce map[string]bool
}

func newFakeGateway(t *testing.T, n int) *fakeGateway {
	f := &fakeGateway{failOnce: map[string]bool{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requests++
		if r.Header.Get("X-API-Key") != liveCordumKey || r.Header.Get("X-Tenant-ID") != "default" {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/api/v1/dlq/page" {
			http.NotFound(w, r)
			return
		}
		cur := r.URL.Query().Get("cursor")
		if f.failOnce[cur] {
			delete(f.failOnce, cur)
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		start, _ := strconv.Atoi(cur)
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		var items []string
		for i := start; i < n && i < start+limit; i++ {
			items = append(items, fmt.Sprintf(`{"job_id":"job_%04d","topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason":"pool overloaded","reason_code":"pool_overloaded","last_state":"JOB_STATUS_PENDING","attempts":3,"created_at":"2026-11-20T10:00:00Z"}`, i))
		}
		list := "[" + strings.Join(items, ",") + "]"
		if start+limit < n {
			// The cursor key first on some pages: key order is not fixed.
			if (start/limit)%2 == 0 {
				fmt.Fprintf(w, `{"next_cursor":%d,"items":%s}`, start+limit, list)
			} else {
				fmt.Fprintf(w, `{"items":%s,"next_cursor":%d}`, list, start+limit)
			}
			return
		}
		fmt.Fprintf(w, `{"items":%s}`, list)
	}))
	t.Cleanup(f.Close)
	return f
}

// fakeNexoraServer serves GET /api/dead-letters?state=&page=&size= as
// Nexora's observability server does (iamvirul/nexora ObserveCommand.java):
// size capped at 100, body {"items","page","size"} in any key order;
// NEXORA_TOKEN as a bearer token.
func fakeNexoraServer(t *testing.T, pending int) (*httptest.Server, *int) {
	var mu sync.Mutex
	requests := 0
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+liveNexoraTok {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		q := r.URL.Query()
		if r.URL.Path != "/api/dead-letters" || q.Get("state") != "PENDING" {
			http.NotFound(w, r)
			return
		}
		page, _ := strconv.Atoi(q.Get("page"))
		size, _ := strconv.Atoi(q.Get("size"))
		size = min(size, 100)
		var items []string
		for i := page * size; i < pending && i < (page+1)*size; i++ {
			items = append(items, fmt.Sprintf(`{"reviewState":"PENDING","id":"dl-%04d","executionId":"x","goal":"g","context":{"topic":"tool.crm.sync"},"failureCode":"STEP_FAILED","failureMessage":"timed out","failedAt":"2026-11-20T12:00:00Z"}`, i))
		}
		fmt.Fprintf(w, `{"size":%d,"items":[%s],"page":%d}`, size, strings.Join(items, ","), page)
	}))
	t.Cleanup(s.Close)
	return s, &requests
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func fastRetry(s *liveSource) {
	s.Retry = func() backoff.BackOff { return backoff.WithMaxRetries(&backoff.ZeroBackOff{}, 3) }
}

func readLive(t *testing.T, s *liveSource) ([]entry.Entry, error) {
	t.Helper()
	var out []entry.Entry
	for e, err := range s.Entries(context.Background()) {
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

func TestLiveCordumReadsEveryPage(t *testing.T) {
	f := newFakeGateway(t, 1250)
	f.failOnce["500"] = true // page 2 answers 503 once: retried
	s, err := newLiveSource("cordum:"+f.URL, entry.KindCordum, f.URL, envOf(map[string]string{"CORDUM_API_KEY": liveCordumKey}))
	if err != nil {
		t.Fatal(err)
	}
	fastRetry(s)
	es, err := readLive(t, s)
	if err != nil {
		t.Fatal(err)
	}
	got := byID(t, es)
	if len(got) != 1250 {
		t.Fatalf("%d entries, want 1250", len(got))
	}
	for i := range 1250 {
		e, ok := got[fmt.Sprintf("job_%04d", i)]
		if !ok || e.Undecodable() || e.Source != entry.KindCordum || e.ReasonCode != "pool_overloaded" {
			t.Fatalf("job_%04d: %+v", i, e)
		}
		if !strings.HasPrefix(e.Origin, s.OriginPrefix()) {
			t.Fatalf("origin %q does not start with %q", e.Origin, s.OriginPrefix())
		}
	}
	// 3 pages, one retry, and one after the short last page: the gateway
	// sends no cursor after a page it filtered short either (issue 27).
	if f.requests != 5 {
		t.Errorf("%d requests, want 5", f.requests)
	}
	if s.NativeTarget() != "cordum:"+f.URL {
		t.Errorf("native target %q", s.NativeTarget())
	}
}

func TestLiveNexoraReadsEveryPage(t *testing.T) {
	srv, requests := fakeNexoraServer(t, 230)
	s, err := newLiveSource("nexora:"+srv.URL, entry.KindNexora, srv.URL, envOf(map[string]string{"NEXORA_TOKEN": liveNexoraTok}))
	if err != nil {
		t.Fatal(err)
	}
	es, err := readLive(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if got := byID(t, es); len(got) != 230 || got["dl-0229"].ReasonCode != "STEP_FAILED" {
		t.Fatalf("%d entries", len(got))
	}
	if *requests != 5 { // 3 pages, and before pages 2 and 3 a one-entry check
		t.Errorf("%d requests, want 5", *requests)
	}
}

// TestLiveRefusedNamesURLNotSecret: 401/403 is a clear error naming the
// URL and the variables to check, never the credential, and not retried.
func TestLiveRefusedNamesURLNotSecret(t *testing.T) {
	f := newFakeGateway(t, 5)
	wrong := "wrong-" + liveCordumKey
	s, _ := newLiveSource("cordum:"+f.URL, entry.KindCordum, f.URL, envOf(map[string]string{"CORDUM_API_KEY": wrong}))
	fastRetry(s)
	_, err := readLive(t, s)
	if err == nil || !strings.Contains(err.Error(), f.URL+"/api/v1/dlq/page") || !strings.Contains(err.Error(), "401") ||
		!strings.Contains(err.Error(), "CORDUM_API_KEY") || strings.Contains(err.Error(), wrong) {
		t.Fatalf("error: %v", err)
	}
	if f.requests != 1 {
		t.Errorf("401 retried: %d requests", f.requests)
	}
	srv, _ := fakeNexoraServer(t, 1)
	n, _ := newLiveSource("nexora:"+srv.URL, entry.KindNexora, srv.URL, envOf(nil))
	if _, err := readLive(t, n); err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "NEXORA_TOKEN") {
		t.Fatalf("nexora error: %v", err)
	}
}

// TestLiveServerDownIsRetriedThenReported: connection errors are retried
// with backoff, then reported naming the URL.
func TestLiveServerDownIsRetriedThenReported(t *testing.T) {
	f := newFakeGateway(t, 5)
	url := f.URL
	f.Close()
	s, _ := newLiveSource("cordum:"+url, entry.KindCordum, url, envOf(nil))
	fastRetry(s)
	s.Client = httpout.New(2 * time.Second)
	if _, err := readLive(t, s); err == nil || !strings.Contains(err.Error(), url) {
		t.Fatalf("error: %v", err)
	}
}

func TestParseLiveSource(t *testing.T) {
	for _, spec := range []string{"cordum:http://gw:8081", "nexora:https://nx:8090/"} {
		src, err := Parse(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if _, ok := src.(interface{ NativeTarget() string }); !ok {
			t.Errorf("%s: %T", spec, src)
		}
	}
}

// TestLiveWriteBack: Cordum gets DELETE /api/v1/dlq/{job_id}, Nexora
// POST /api/dead-letters/{id}/resolve {"reason"}, with credentials; an
// entry already gone is not an error; a refusal is.
func TestLiveWriteBack(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		b := make([]byte, 256)
		n, _ := r.Body.Read(b)
		got = append(got, r.Method+" "+r.URL.Path+" "+string(b[:n])+" "+r.Header.Get("X-API-Key")+r.Header.Get("Authorization"))
		switch {
		case strings.Contains(r.URL.Path, "gone"):
			w.WriteHeader(http.StatusNotFound)
		case strings.Contains(r.URL.Path, "denied"):
			w.WriteHeader(http.StatusForbidden)
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(srv.Close)
	env := envOf(map[string]string{"CORDUM_API_KEY": liveCordumKey, "NEXORA_TOKEN": liveNexoraTok})
	c, _ := newLiveSource("cordum:"+srv.URL, entry.KindCordum, srv.URL, env)
	n, _ := newLiveSource("nexora:"+srv.URL, entry.KindNexora, srv.URL, env)
	ctx := context.Background()
	for _, err := range []error{
		c.MarkReplayed(ctx, entry.Entry{ID: "job_1"}),
		n.MarkReplayed(ctx, entry.Entry{ID: "dl-1"}),
		c.MarkReplayed(ctx, entry.Entry{ID: "gone"}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	err := c.MarkReplayed(ctx, entry.Entry{ID: "denied"})
	if err == nil || strings.Contains(err.Error(), liveCordumKey) {
		t.Fatalf("refused write-back: %v", err)
	}
	want := []string{
		"DELETE /api/v1/dlq/job_1  " + liveCordumKey,
		`POST /api/dead-letters/dl-1/resolve {"reason":"replayed by replayctl"} Bearer ` + liveNexoraTok,
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("request %d: %q, want %q", i, got[i], w)
		}
	}
}

// scoreGateway pages Cordum's DLQ as the real gateway does, not by offset:
// the index score is created_at in whole seconds (cordum-io/cordum
// core/infra/store/dlq_store.go:87, ZAdd Score CreatedAt.Unix()), a page is
// ZREVRANGEBYSCORE max=cursor (inclusive) count=limit (dlq_store.go:166),
// and next_cursor is the last entry's created_at in microseconds minus one,
// JSON null when the page is short (gateway handlers_dlq.go:83-90), which
// the next request truncates back to seconds (normalizeTimestampSecondsUpper).
// So the entries of the page's last second are listed again on the next page.
func scoreGateway(t *testing.T, created []time.Time) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		cur, _ := strconv.ParseInt(r.URL.Query().Get("cursor"), 10, 64)
		maxSec := int64(1 << 62)
		if cur > 0 {
			maxSec = cur / 1_000_000
		}
		var items []string
		var last time.Time
		// created is newest first, as ZREVRANGEBYSCORE returns it.
		for i, c := range created {
			if c.Unix() > maxSec || len(items) == limit {
				continue
			}
			items = append(items, fmt.Sprintf(`{"job_id":"job_%04d","topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason_code":"pool_overloaded","attempts":3,"created_at":%q}`, i, c.Format(time.RFC3339Nano)))
			last = c
		}
		next := "null"
		if len(items) == limit {
			next = strconv.FormatInt(last.UnixMicro()-1, 10)
		}
		fmt.Fprintf(w, `{"items":[%s],"next_cursor":%s}`, strings.Join(items, ","), next)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestLiveCordumScorePagesYieldEachEntryOnce: 1250 entries failing 3 to a
// second overlap at every page boundary; each is read once, all are read.
func TestLiveCordumScorePagesYieldEachEntryOnce(t *testing.T) {
	base := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	var created []time.Time
	for i := range 1250 {
		created = append(created, base.Add(-time.Duration(i/3)*time.Second-time.Duration(i%3+1)*time.Millisecond))
	}
	srv := scoreGateway(t, created)
	s, err := newLiveSource("cordum:"+srv.URL, entry.KindCordum, srv.URL, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	es, err := readLive(t, s)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range es {
		seen[e.ID]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s read %d times", id, n)
		}
	}
	if len(seen) != 1250 {
		t.Errorf("%d distinct entries, want 1250", len(seen))
	}
}

// nexoraStore serves GET /api/dead-letters as Nexora does: the PENDING
// records newest first, by offset (iamvirul/nexora JdbcExecutionStore.java
// findDeadLetters: WHERE review_state = ? ORDER BY failed_at DESC LIMIT ?
// OFFSET ?; ObserveCommand.java: page*size, size capped at 100, body
// {"items","page","size"}). take marks a record REPLAYED, as POST
// /api/dead-letters/{id}/replay does, and arrive adds a new failure on top.
type nexoraStore struct {
	mu      sync.Mutex
	base    time.Time
	ids     []string // newest first
	state   map[string]string
	failed  map[string]time.Time
	nextNew int
}

func newNexoraStore(t *testing.T, n int) (*nexoraStore, *httptest.Server) {
	ns := &nexoraStore{base: time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC), state: map[string]string{}, failed: map[string]time.Time{}}
	for i := range n {
		id := fmt.Sprintf("dl-%04d", i)
		ns.ids = append(ns.ids, id)
		ns.state[id] = "PENDING"
		// Two records to a second: ties are ordered arbitrarily.
		ns.failed[id] = ns.base.Add(-time.Duration(i/2) * time.Second)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns.mu.Lock()
		defer ns.mu.Unlock()
		q := r.URL.Query()
		page, _ := strconv.Atoi(q.Get("page"))
		size, _ := strconv.Atoi(q.Get("size"))
		size = min(size, 100)
		var pending []string
		for _, id := range ns.ids {
			if ns.state[id] == "PENDING" {
				pending = append(pending, id)
			}
		}
		var items []string
		for i := page * size; i < len(pending) && i < (page+1)*size; i++ {
			id := pending[i]
			items = append(items, fmt.Sprintf(`{"id":%q,"executionId":"x","goal":"g","context":{},"failureCode":"STEP_FAILED","failureMessage":"timed out","failedAt":%q,"reviewState":"PENDING","resolveReason":null}`,
				id, ns.failed[id].Format(time.RFC3339)))
		}
		fmt.Fprintf(w, `{"items":[%s],"page":%d,"size":%d}`, strings.Join(items, ","), page, size)
	}))
	t.Cleanup(srv.Close)
	return ns, srv
}

func (ns *nexoraStore) take(id string) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.state[id] = "REPLAYED"
}

func (ns *nexoraStore) arrive() {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.nextNew++
	id := fmt.Sprintf("new-%04d", ns.nextNew)
	ns.ids = append([]string{id}, ns.ids...)
	ns.state[id] = "PENDING"
	ns.failed[id] = ns.base.Add(time.Duration(ns.nextNew) * time.Second)
}

// TestLiveNexoraReadIsCompleteWhileEntriesLeave: the reader of a live
// Nexora replays (or holds) entries while later pages are still to be
// read; each replayed one leaves PENDING and shifts the offsets. Every
// entry pending when the read began is read exactly once, whichever share
// is taken meanwhile and while new failures arrive on top. Before, a read
// of 250 with every entry replayed at once read 200.
func TestLiveNexoraReadIsCompleteWhileEntriesLeave(t *testing.T) {
	for _, tt := range []struct {
		name    string
		n       int
		takes   func(i int) bool
		arrives bool
	}{
		{"all replayed", 250, func(int) bool { return true }, false},
		{"every other held", 333, func(i int) bool { return i%2 == 0 }, false},
		{"none replayed", 230, func(int) bool { return false }, false},
		{"replayed while new ones arrive", 420, func(i int) bool { return i%3 != 0 }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns, srv := newNexoraStore(t, tt.n)
			s, err := newLiveSource("nexora:"+srv.URL, entry.KindNexora, srv.URL, envOf(nil))
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			i := 0
			for e, err := range s.Entries(context.Background()) {
				if err != nil {
					t.Fatal(err)
				}
				seen[e.ID]++
				if tt.takes(i) {
					ns.take(e.ID)
				}
				if tt.arrives && i%40 == 0 {
					ns.arrive()
				}
				i++
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("%s read %d times", id, n)
				}
			}
			for j := range tt.n {
				if id := fmt.Sprintf("dl-%04d", j); seen[id] == 0 {
					t.Errorf("%s never read (%d of %d read)", id, len(seen), tt.n)
					break
				}
			}
		})
	}
}

// TestLiveCordumPageOfOneSecond: more than a page dead-lettered in one
// second makes the gateway answer the same page forever (its cursor is a
// whole second); the read stops with an error that says so and names the
// way round, after yielding that page once.
func TestLiveCordumPageOfOneSecond(t *testing.T) {
	at := time.Date(2026, 11, 20, 10, 0, 0, 500_000_000, time.UTC)
	created := make([]time.Time, 600)
	for i := range created {
		created[i] = at
	}
	srv := scoreGateway(t, created)
	s, _ := newLiveSource("cordum:"+srv.URL, entry.KindCordum, srv.URL, envOf(nil))
	es, err := readLive(t, s)
	if err == nil || !strings.Contains(err.Error(), "repeats") || !strings.Contains(err.Error(), "cordum-redis:") {
		t.Fatalf("error: %v", err)
	}
	if len(es) != cordum.PageSize {
		t.Errorf("%d entries before the error, want the page's %d", len(es), cordum.PageSize)
	}
}

// TestLiveRetriesAreTold: a page request that fails and will be retried is
// told to OnRetry, naming the URL and never the credential; before, a
// source that was down was retried for a minute in silence.
func TestLiveRetriesAreTold(t *testing.T) {
	f := newFakeGateway(t, 3)
	f.failOnce[""] = true
	s, _ := newLiveSource("cordum:"+f.URL, entry.KindCordum, f.URL, envOf(map[string]string{"CORDUM_API_KEY": liveCordumKey}))
	fastRetry(s)
	var told []string
	s.OnRetry(func(msg string) { told = append(told, msg) })
	es, err := readLive(t, s)
	if err != nil || len(es) != 3 {
		t.Fatalf("%d entries, %v", len(es), err)
	}
	// The answer's body says why (the fake gateway answers "busy").
	if len(told) != 1 || !strings.Contains(told[0], f.URL+"/api/v1/dlq/page") || !strings.Contains(told[0], "503: busy") ||
		!strings.Contains(told[0], "retrying") || strings.Contains(told[0], liveCordumKey) {
		t.Fatalf("told: %q", told)
	}
}

// Entries that leave PENDING between the read's check of the entry before a
// page and the page's own request (other workers replay or resolve them
// meanwhile: JdbcExecutionStore.findDeadLetters pages by OFFSET) moved the
// rest up past the page's start. Found in review: with 5 leaving before
// each page, 10 of 250 were never read. The read checks again after the
// page and reads the page before once more when entries moved.
func TestLiveNexoraReadIsCompleteWhenEntriesLeaveBeforeEachPage(t *testing.T) {
	ns, back := newNexoraStore(t, 250)
	var mu sync.Mutex
	var yielded []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("size") == "100" && q.Get("page") != "0" {
			// Between the probe and this page: 5 of the entries already read leave.
			mu.Lock()
			n := 0
			for _, id := range yielded {
				ns.mu.Lock()
				st := ns.state[id]
				ns.mu.Unlock()
				if st == "PENDING" && n < 5 {
					ns.take(id)
					n++
				}
			}
			mu.Unlock()
		}
		resp, err := http.Get(back.URL + r.URL.RequestURI())
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		_, _ = w.Write(b)
	}))
	defer proxy.Close()
	s, err := newLiveSource("nexora:"+proxy.URL, entry.KindNexora, proxy.URL, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for e, err := range s.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		seen[e.ID]++
		mu.Lock()
		yielded = append(yielded, e.ID)
		mu.Unlock()
	}
	missing := 0
	for j := range 250 {
		if seen[fmt.Sprintf("dl-%04d", j)] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d entries pending at the start were never read (%d read)", missing, len(seen))
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s read %d times", id, n)
		}
	}
}
