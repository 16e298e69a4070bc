package replay

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/registry"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// resolvingNexora lists PENDING dead letters and answers POST
// /api/dead-letters/{id}/resolve {"reason"} as Nexora's observability
// server does (iamvirul/nexora nexora-cli ObserveCommand.java: 200 and
// the record RESOLVED; 409 when no longer PENDING). fail answers that many
// resolve calls 503 first. Each resolve call also records whether the
// entry was already resolved or replayed in replayctl's store when it
// arrived (nothing may be written back before it is recorded).
type resolvingNexora struct {
	*httptest.Server
	mu          sync.Mutex
	state       map[string]string
	resolves    int
	reasons     []string
	fail        int
	beforeStore int    // resolve calls that came before the store said resolved
	msg         string // every record's failureMessage
}

func newResolvingNexora(t *testing.T, b *testBundle, ids ...string) *resolvingNexora {
	f := &resolvingNexora{state: map[string]string{}}
	for _, id := range ids {
		f.state[id] = "PENDING"
	}
	resolve := regexp.MustCompile(`^/api/dead-letters/([^/]+)/resolve$`)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testNexoraTok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.Method == http.MethodGet && r.URL.Path == "/api/dead-letters" {
			items := []map[string]any{}
			if r.URL.Query().Get("page") == "0" {
				for id, st := range f.state {
					if st == r.URL.Query().Get("state") {
						items = append(items, map[string]any{"id": id, "reviewState": st, "failureCode": "STEP_FAILED", "failureMessage": f.msg})
					}
				}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"items": items, "page": 0, "size": 100})
			return
		}
		m := resolve.FindStringSubmatch(r.URL.Path)
		if r.Method != http.MethodPost || m == nil {
			http.NotFound(w, r)
			return
		}
		f.resolves++
		var body struct{ Reason string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.reasons = append(f.reasons, body.Reason)
		if er := b.entry("nexora:" + m[1]); er.Status != store.StatusResolved && er.Status != store.StatusReplayed {
			f.beforeStore++
		}
		if f.fail > 0 {
			f.fail--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if f.state[m[1]] != "PENDING" {
			w.WriteHeader(http.StatusConflict)
			return
		}
		f.state[m[1]] = "RESOLVED"
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *resolvingNexora) calls() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resolves, f.beforeStore
}

// writeBackAudits returns the outcomes of the write_back audit records.
func writeBackAudits(t *testing.T, b *testBundle) []string {
	t.Helper()
	var out []string
	if err := b.store.AuditRange(context.Background(), 1, func(_ uint64, s audit.Sealed, derr error) error {
		if derr != nil {
			return derr
		}
		rec, err := s.Open()
		if err != nil {
			return err
		}
		if rec.Kind == audit.KindWriteBack {
			out = append(out, rec.Outcome)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestResolveWritesBackToNexoraAfterRecording: `dlq resolve` of an entry
// from a live Nexora source records the resolve and the owed write-back
// first; the next reconcile tells Nexora (POST .../resolve). Nexora
// answering 503 leaves the write-back owed on the entry (audited); the
// run after retries it once more and it succeeds; later runs call nothing.
func TestResolveWritesBackToNexoraAfterRecording(t *testing.T) {
	t.Setenv("NEXORA_TOKEN", testNexoraTok)
	b := newBundle(t, baseRules)
	f := newResolvingNexora(t, b, "dl-1")
	src, err := source.Parse("nexora:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), src) // ingest
	if n, _ := f.calls(); n != 0 {
		t.Fatalf("%d resolve calls before any resolve", n)
	}
	er, err := Resolve(context.Background(), b.store, "dl-1", "alice", "fixed by hand")
	if err != nil {
		t.Fatal(err)
	}
	if er.WriteBackPending != store.WriteBackResolved {
		t.Fatalf("resolve recorded write_back_pending %q", er.WriteBackPending)
	}
	if n, _ := f.calls(); n != 0 {
		t.Fatalf("%d resolve calls during the resolve itself", n)
	}

	f.mu.Lock()
	f.fail = 1
	f.mu.Unlock()
	rep := b.run(b.reconciler(1), src)
	if n, _ := f.calls(); n != 1 {
		t.Fatalf("first run after resolve: %d resolve calls, want 1", n)
	}
	if rep.WriteBackErrors != 1 {
		t.Errorf("write_back_errors %d, want 1", rep.WriteBackErrors)
	}
	if got := b.entry("nexora:dl-1").WriteBackPending; got != store.WriteBackResolved {
		t.Fatalf("failed write-back not kept on the entry: %q", got)
	}

	b.run(b.reconciler(1), src)
	n, early := f.calls()
	if n != 2 {
		t.Fatalf("retry run: %d resolve calls, want 2", n)
	}
	if early != 0 {
		t.Errorf("%d write-backs reached Nexora before the store said resolved", early)
	}
	if got := b.entry("nexora:dl-1"); got.WriteBackPending != "" || got.Status != store.StatusResolved {
		t.Errorf("after success: status %s, write_back_pending %q", got.Status, got.WriteBackPending)
	}
	if got := writeBackAudits(t, b); len(got) != 2 || got[0] != "failed" || got[1] != "done" {
		t.Errorf("write_back audit outcomes %v, want [failed done]", got)
	}

	f.mu.Lock()
	reasons := append([]string(nil), f.reasons...)
	f.mu.Unlock()
	if len(reasons) != 2 || reasons[1] != "fixed by hand" {
		t.Errorf("Nexora was told reasons %q, want the resolve's", reasons)
	}

	b.run(b.reconciler(1), src)
	if n, _ := f.calls(); n != 2 {
		t.Errorf("a run after success called resolve again: %d calls", n)
	}
}

// TestFailedReplayWriteBackIsRetried: a replay to another target succeeds
// and is recorded; telling Nexora (POST .../resolve) fails with 503, so the
// write-back stays owed on the entry; the next run retries it without
// replaying again, and it succeeds.
func TestFailedReplayWriteBackIsRetried(t *testing.T) {
	t.Setenv("NEXORA_TOKEN", testNexoraTok)
	b := newBundle(t, `version: v1
dlq_rules:
  - match: {source: nexora}
    action: auto_replay
    max_replays: 2
`)
	f := newResolvingNexora(t, b, "dl-7")
	f.fail, f.msg = 1, "step timed out"
	src, err := source.Parse("nexora:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	rep := b.run(b.reconciler(1), src)
	if rep.Replays.Succeeded != 1 || rep.WriteBackErrors != 1 {
		t.Fatalf("first run: replays %+v, write_back_errors %d", rep.Replays, rep.WriteBackErrors)
	}
	if got := b.entry("nexora:dl-7").WriteBackPending; got != store.WriteBackReplayed {
		t.Fatalf("failed write-back after a replay not kept: %q", got)
	}
	rep = b.run(b.reconciler(1), src)
	if rep.Replays.Dispatched != 0 {
		t.Errorf("retry run replayed again: %+v", rep.Replays)
	}
	n, early := f.calls()
	if n != 2 || early != 0 {
		t.Errorf("resolve calls %d (want 2), %d before the outcome was recorded", n, early)
	}
	if got := b.entry("nexora:dl-7"); got.WriteBackPending != "" {
		t.Errorf("write-back still owed after success: %q", got.WriteBackPending)
	}
	if got := writeBackAudits(t, b); len(got) != 2 || got[0] != "failed" || got[1] != "done" {
		t.Errorf("write_back audit outcomes %v, want [failed done]", got)
	}
}

// TestResolveWritesBackToLiveCordum: a resolved entry from a live Cordum
// gateway is taken out of Cordum's DLQ by the next reconcile with
// DELETE /api/v1/dlq/{job_id} (cordum-io/cordum core/controlplane/gateway
// handlers_dlq.go handleDeleteDLQ: 204), once, after the resolve is stored.
func TestResolveWritesBackToLiveCordum(t *testing.T) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	b := newBundle(t, baseRules)
	var mu sync.Mutex
	dlq := map[string]bool{"job_9": true}
	deletes, early := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != testCordumKey {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/dlq/page":
			items := []map[string]any{}
			for id := range dlq {
				items = append(items, map[string]any{"job_id": id, "topic": "tool.email.send", "status": "JOB_STATUS_FAILED",
					"reason": "worker said no", "attempts": 1, "created_at": "2026-11-20T10:00:00Z"})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"items": items})
		case r.Method == http.MethodDelete && r.URL.Path == "/api/v1/dlq/job_9":
			deletes++
			if b.entry("cordum:job_9").Status != store.StatusResolved {
				early++
			}
			delete(dlq, "job_9")
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	src, err := source.Parse("cordum:" + srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), src)
	if _, err := Resolve(context.Background(), b.store, "job_9", "alice", "duplicate of job_8"); err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), src)
	b.run(b.reconciler(1), src)
	mu.Lock()
	defer mu.Unlock()
	if deletes != 1 || early != 0 || dlq["job_9"] {
		t.Errorf("DELETE calls %d (want 1), %d before the resolve was stored, still in DLQ: %v", deletes, early, dlq["job_9"])
	}
	if got := b.entry("cordum:job_9").WriteBackPending; got != "" {
		t.Errorf("write-back still owed: %q", got)
	}
}

// TestResolveWritesBackToCordumRedis: against a real redis-server holding
// Cordum's DLQ (its layout as internal/source/redis.go documents from
// upstream: dlq:entry:<id> and the dlq:index sorted set), a resolved entry is taken
// out with DEL+ZREM by the next reconcile; the other entry stays.
func TestResolveWritesBackToCordumRedis(t *testing.T) {
	b := newBundle(t, baseRules)
	addr := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	for i, id := range []string{"job_a", "job_b"} {
		c.ZAdd(ctx, "dlq:index", redis.Z{Score: float64(i), Member: id})
		c.Set(ctx, "dlq:entry:"+id, `{"job_id":"`+id+`","topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason":"worker said no","attempts":1}`, 0)
	}
	src, err := source.Parse("cordum-redis:redis://" + addr + "/0")
	if err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), src)
	if n := c.Exists(ctx, "dlq:entry:job_a").Val(); n != 1 {
		t.Fatalf("job_a left Cordum's DLQ before any resolve")
	}
	if _, err := Resolve(ctx, b.store, "job_a", "alice", "sent by hand"); err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), src)
	if n := c.Exists(ctx, "dlq:entry:job_a").Val(); n != 0 {
		t.Errorf("dlq:entry:job_a still present after the resolve's write-back")
	}
	if ids := c.ZRange(ctx, "dlq:index", 0, -1).Val(); len(ids) != 1 || ids[0] != "job_b" {
		t.Errorf("dlq:index %v, want [job_b]", ids)
	}
	if got := b.entry("cordum-redis:job_a").WriteBackPending; got != "" {
		t.Errorf("write-back still owed: %q", got)
	}
}

// TestResolveWritesBackToProdigy: resolving an item replayctl did not
// replay removes its file on the next run, as the replay write-back (and
// `prodigy dlq retry`) does; items not resolved stay.
func TestResolveWritesBackToProdigy(t *testing.T) {
	b := newBundle(t, baseRules)
	src := b.prodigyCopy(t)
	b.sink.status = func(string, int) int { return http.StatusOK }
	b.run(b.reconciler(1), src)
	var kept []*store.EntryRecord
	_ = b.store.Entries(context.Background(), func(er *store.EntryRecord) error {
		if er.Entry.Source == "prodigy" && !er.Entry.Undecodable() && er.Status != store.StatusReplayed &&
			er.Status != store.StatusResolved {
			kept = append(kept, er)
		}
		return nil
	})
	if len(kept) < 2 {
		t.Fatalf("need two items left after the first run, have %d", len(kept))
	}
	target, other := kept[0], kept[1]
	if _, err := os.Stat(target.Entry.Origin); err != nil {
		t.Fatalf("item file gone before any resolve: %v", err)
	}
	if _, err := Resolve(context.Background(), b.store, target.Entry.Ref(), "alice", "fixed upstream"); err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), src)
	if _, err := os.Stat(target.Entry.Origin); !os.IsNotExist(err) {
		t.Errorf("resolved item %s still on disk (%v)", target.Entry.Origin, err)
	}
	if _, err := os.Stat(other.Entry.Origin); err != nil {
		t.Errorf("unresolved item %s removed: %v", other.Entry.Origin, err)
	}
	if got := b.entry(target.Entry.Ref()).WriteBackPending; got != "" {
		t.Errorf("write-back still owed: %q", got)
	}
}

// TestSingleReplayWritesBackToProdigy: a single replay of a stored entry
// (dlq replay ID, approvals --replay-now, bulk) finds its source again
// (registry.Finder) and writes back as a run does: the item file goes.
// It ran with no source at all, so the item stayed in Prodigy's DLQ.
func TestSingleReplayWritesBackToProdigy(t *testing.T) {
	b := newBundle(t, baseRules)
	src := b.prodigyCopy(t)
	b.sink.status = func(string, int) int { return http.StatusInternalServerError }
	b.run(b.reconciler(1), src)
	var pending *store.EntryRecord
	_ = b.store.Entries(context.Background(), func(er *store.EntryRecord) error {
		if pending == nil && er.Entry.Source == "prodigy" && !er.Entry.Undecodable() && er.Status == store.StatusPending {
			pending = er
		}
		return nil
	})
	if pending == nil {
		t.Fatal("no Prodigy item left pending after a run against a failing target")
	}
	b.sink.status = func(string, int) int { return http.StatusOK }
	r := b.reconciler(1)
	finder := &registry.Finder{}
	r.ForEntry = func(e *entry.Entry) (source.Source, bool) { return finder.For(e) }
	res, err := r.One(context.Background(), pending)
	if err != nil || res.Status != store.StatusReplayed {
		t.Fatalf("single replay: %+v %v", res, err)
	}
	if _, err := os.Stat(pending.Entry.Origin); !os.IsNotExist(err) {
		t.Errorf("replayed item %s still on disk (%v)", pending.Entry.Origin, err)
	}
	if got := b.entry(pending.Entry.Ref()).WriteBackPending; got != "" {
		t.Errorf("write-back still owed: %q", got)
	}
}

// owedSpy is a source whose write-back first looks at what the store says
// the entry owes: what a run that died at that moment would leave.
type owedSpy struct {
	source.Source
	b    *testBundle
	mu   sync.Mutex
	owed map[string]string
}

func (s *owedSpy) Settle(ctx context.Context, e *entry.Entry, st connector.Settlement) error {
	s.mu.Lock()
	s.owed[e.Ref()] = s.b.entry(e.Ref()).WriteBackPending
	s.mu.Unlock()
	return s.Source.(connector.Settler).Settle(ctx, e, st)
}

// TestReplayWriteBackOwedFromTheOutcome: a replay's write-back is owed in
// the same commit as its succeeded outcome, so a run that dies between the
// two (or in the middle of the write-back) leaves it owed, and the next
// run finishes it. It was recorded only once the write-back had failed:
// a crash in between left the item in Prodigy's DLQ for good.
func TestReplayWriteBackOwedFromTheOutcome(t *testing.T) {
	b := newBundle(t, baseRules)
	spy := &owedSpy{Source: b.prodigyCopy(t), b: b, owed: map[string]string{}}
	b.sink.status = func(string, int) int { return http.StatusOK }
	b.run(b.reconciler(1), spy)
	if len(spy.owed) == 0 {
		t.Fatal("no write-back ran")
	}
	for ref, owed := range spy.owed {
		if owed != store.WriteBackReplayed {
			t.Errorf("%s: owed %q while being written back, want %q", ref, owed, store.WriteBackReplayed)
		}
		if got := b.entry(ref).WriteBackPending; got != "" {
			t.Errorf("%s: still owed %q after the write-back", ref, got)
		}
	}
}
