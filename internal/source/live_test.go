package source

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/cordum"
	"github.com/replayctl/replayctl/internal/connector/cordum/cordumtest"
	"github.com/replayctl/replayctl/internal/connector/httpout"
	"github.com/replayctl/replayctl/internal/connector/nexora/nexoratest"
	"github.com/replayctl/replayctl/internal/entry"
)

const (
	liveCordumKey = "ck-live-5e1f"
	liveNexoraTok = "nx-live-9a7c"
)

// liveGateway is the Cordum connector's fake gateway (cordumtest) holding
// job_0000 ... job_N-1, taking liveCordumKey.
func liveGateway(t *testing.T, n int) *cordumtest.Gateway {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("job_%04d", i)
	}
	return cordumtest.New(t, liveCordumKey, ids...)
}

// busyOnce makes the gateway answer its nth page request (from 1) 503
// "busy", once.
func busyOnce(g *cordumtest.Gateway, nth int) {
	pages := 0
	g.Intercept = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/api/v1/dlq/page" {
			return false
		}
		if pages++; pages == nth {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return true
		}
		return false
	}
}

// liveNexora is the Nexora connector's fake server (nexoratest) holding
// dl-0000 ... dl-N-1 PENDING behind a proxy that takes liveNexoraTok and
// answers 403 to another.
func liveNexora(t *testing.T, pending int) *nexoratest.Server {
	ids := make([]string, pending)
	for i := range ids {
		ids[i] = fmt.Sprintf("dl-%04d", i)
	}
	s := nexoratest.New(t, liveNexoraTok, nexoratest.Pending(ids...))
	s.Refuse = http.StatusForbidden
	return s
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
	f := liveGateway(t, 1250)
	busyOnce(f, 2) // page 2 answers 503 once: retried
	s, err := newLiveSource("cordum:"+f.URL, "cordum", f.URL, envOf(map[string]string{"CORDUM_API_KEY": liveCordumKey}))
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
		if !ok || e.Undecodable() || e.Source != "cordum" || e.ReasonCode != "pool_overloaded" {
			t.Fatalf("job_%04d: %+v", i, e)
		}
		if !strings.HasPrefix(e.Origin, s.OriginPrefix()) {
			t.Fatalf("origin %q does not start with %q", e.Origin, s.OriginPrefix())
		}
	}
	// 3 pages, one retry, and one after the short last page: the gateway
	// sends no cursor after a page it filtered short either (issue 27).
	if n := f.RequestCount(); n != 5 {
		t.Errorf("%d requests, want 5", n)
	}
	if s.NativeTarget() != "cordum:"+f.URL {
		t.Errorf("native target %q", s.NativeTarget())
	}
}

func TestLiveNexoraReadsEveryPage(t *testing.T) {
	srv := liveNexora(t, 230)
	s, err := newLiveSource("nexora:"+srv.URL, "nexora", srv.URL, envOf(map[string]string{"NEXORA_TOKEN": liveNexoraTok}))
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
	if n := srv.RequestCount(); n != 5 { // 3 pages, and before pages 2 and 3 a one-entry check
		t.Errorf("%d requests, want 5", n)
	}
}

// TestLiveRefusedNamesURLNotSecret: 401/403 is a clear error naming the
// URL and the variables to check, never the credential, and not retried.
func TestLiveRefusedNamesURLNotSecret(t *testing.T) {
	f := liveGateway(t, 5)
	wrong := "wrong-" + liveCordumKey
	s, _ := newLiveSource("cordum:"+f.URL, "cordum", f.URL, envOf(map[string]string{"CORDUM_API_KEY": wrong}))
	fastRetry(s)
	_, err := readLive(t, s)
	if err == nil || !strings.Contains(err.Error(), f.URL+"/api/v1/dlq/page") || !strings.Contains(err.Error(), "401") ||
		!strings.Contains(err.Error(), "CORDUM_API_KEY") || strings.Contains(err.Error(), wrong) {
		t.Fatalf("error: %v", err)
	}
	if n := f.RequestCount(); n != 1 {
		t.Errorf("401 retried: %d requests", n)
	}
	srv := liveNexora(t, 1)
	n, _ := newLiveSource("nexora:"+srv.URL, "nexora", srv.URL, envOf(nil))
	if _, err := readLive(t, n); err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "NEXORA_TOKEN") {
		t.Fatalf("nexora error: %v", err)
	}
}

// TestLiveServerDownIsRetriedThenReported: connection errors are retried
// with backoff, then reported naming the URL.
func TestLiveServerDownIsRetriedThenReported(t *testing.T) {
	f := liveGateway(t, 5)
	url := f.URL
	f.Close()
	s, _ := newLiveSource("cordum:"+url, "cordum", url, envOf(nil))
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
	c, _ := newLiveSource("cordum:"+srv.URL, "cordum", srv.URL, env)
	n, _ := newLiveSource("nexora:"+srv.URL, "nexora", srv.URL, env)
	ctx := context.Background()
	replayed := connector.Settlement{Replayed: true}
	for _, err := range []error{
		c.Settle(ctx, &entry.Entry{ID: "job_1"}, replayed),
		n.Settle(ctx, &entry.Entry{ID: "dl-1"}, replayed),
		c.Settle(ctx, &entry.Entry{ID: "gone"}, replayed),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	err := c.Settle(ctx, &entry.Entry{ID: "denied"}, replayed)
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

// scoreGateway is the Cordum connector's fake gateway (cordumtest), which
// pages by score as the real gateway does, not by offset: the entries of
// a page's last second are listed again on the next page. created is
// newest first; job_NNNN failed at created[NNNN]. It takes no key.
func scoreGateway(t *testing.T, created []time.Time) *cordumtest.Gateway {
	g := cordumtest.New(t, "")
	for i, c := range created {
		g.Add(fmt.Sprintf("job_%04d", i), c)
	}
	return g
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
	s, err := newLiveSource("cordum:"+srv.URL, "cordum", srv.URL, envOf(nil))
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

// nexoraStore is the Nexora connector's fake server (nexoratest), no token
// checked: dl-0000 ... PENDING, newest first, two records to a second
// (ties ordered arbitrarily, as findDeadLetters' ORDER BY failed_at DESC
// leaves them). take marks a record REPLAYED, as POST
// /api/dead-letters/{id}/replay does, and arrive adds a new failure on top.
type nexoraStore struct {
	*nexoratest.Server
	base    time.Time
	nextNew int
}

func newNexoraStore(t *testing.T, n int) (*nexoraStore, *nexoratest.Server) {
	ns := &nexoraStore{Server: nexoratest.New(t, "", nil), base: time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)}
	for i := range n {
		id := fmt.Sprintf("dl-%04d", i)
		ns.State[id] = "PENDING"
		ns.Failed[id] = ns.base.Add(-time.Duration(i/2) * time.Second)
	}
	return ns, ns.Server
}

func (ns *nexoraStore) take(id string) { ns.Set(id, "REPLAYED") }

func (ns *nexoraStore) arrive() {
	ns.Mu.Lock()
	defer ns.Mu.Unlock()
	ns.nextNew++
	id := fmt.Sprintf("new-%04d", ns.nextNew)
	ns.State[id] = "PENDING"
	ns.Failed[id] = ns.base.Add(time.Duration(ns.nextNew) * time.Second)
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
			s, err := newLiveSource("nexora:"+srv.URL, "nexora", srv.URL, envOf(nil))
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
	s, _ := newLiveSource("cordum:"+srv.URL, "cordum", srv.URL, envOf(nil))
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
	f := liveGateway(t, 3)
	busyOnce(f, 1)
	s, _ := newLiveSource("cordum:"+f.URL, "cordum", f.URL, envOf(map[string]string{"CORDUM_API_KEY": liveCordumKey}))
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
				ns.Mu.Lock()
				st := ns.State[id]
				ns.Mu.Unlock()
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
	s, err := newLiveSource("nexora:"+proxy.URL, "nexora", proxy.URL, envOf(nil))
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
