package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// The native crash child's environment: set only by
// TestCrashBetweenCordumRetryAndOutcome when it re-executes the test binary.
const (
	nativeChildEnv  = "REPLAYCTL_NATIVE_CRASH_CHILD"
	nativeCordumKey = "ck-crash-5e1d"
)

// TestNativeCrashChild is the reconcile process of
// TestCrashBetweenCordumRetryAndOutcome: entries read from a Cordum file
// source, replayed through Cordum's own retry endpoint (--target
// cordum:URL). In a normal run it does nothing.
func TestNativeCrashChild(t *testing.T) {
	if os.Getenv(nativeChildEnv) == "" {
		t.Skip("reconcile process of TestCrashBetweenCordumRetryAndOutcome")
	}
	ctx := context.Background()
	eng, _, err := policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(os.Getenv(crashDBEnv), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	src, err := source.Parse("cordum:" + os.Getenv(crashSourceEnv))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := replay.ParseTarget("cordum:"+os.Getenv(crashTargetEnv), "", replay.CredentialsFromEnv(os.Getenv))
	if err != nil {
		t.Fatal(err)
	}
	r := &replay.Reconciler{Engine: eng, Store: st, MaxParallel: 1, Actor: "cron",
		Router: replay.NewRulesRouter(eng.Rules, rt)}
	fmt.Println(markReady)
	if _, err := r.Run(ctx, []source.Source{src}); err != nil {
		t.Fatal(err)
	}
}

// crashCordum behaves as Cordum's gateway does for what this test needs
// (cordum-io/cordum core/controlplane/gateway/handlers_dlq.go):
// handleRetryDLQ answers 404 "dlq entry not found" for a job not in the
// DLQ, else publishes <job_id>-retry-<8 hex>, deletes the DLQ entry and
// answers 200 {"job_id": NEW}; handleListDLQPage answers {"items",
// "next_cursor"} with next_cursor null on the last page. X-API-Key
// authenticates.
//
// hold: the first retry that finds its entry does Cordum's work (the entry
// leaves the DLQ), reports it on applied, and answers only once release
// is closed: by then the caller has been killed.
type crashCordum struct {
	*httptest.Server
	applied chan string
	release chan struct{}

	mu      sync.Mutex
	dlq     map[string]bool
	retries map[string]int
	held    bool
}

func newCrashCordum(t *testing.T, ids ...string) *crashCordum {
	t.Helper()
	f := &crashCordum{applied: make(chan string, 1), release: make(chan struct{}), dlq: map[string]bool{}, retries: map[string]int{}}
	for _, id := range ids {
		f.dlq[id] = true
	}
	retry := regexp.MustCompile(`^/api/v1/dlq/([^/]+)/retry$`)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != nativeCordumKey {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet && r.URL.Path == "/api/v1/dlq/page" {
			f.mu.Lock()
			items := []map[string]any{}
			for _, id := range slicesSorted(f.dlq) {
				items = append(items, map[string]any{"job_id": id, "topic": "tool.email.send", "status": "JOB_STATUS_FAILED",
					"reason_code": "pool_overloaded", "reason": "pool email overloaded", "attempts": 1})
			}
			f.mu.Unlock()
			_ = json.NewEncoder(w).Encode(map[string]any{"items": items, "next_cursor": nil})
			return
		}
		m := retry.FindStringSubmatch(r.URL.Path)
		if r.Method != http.MethodPost || m == nil {
			http.NotFound(w, r)
			return
		}
		f.mu.Lock()
		f.retries[m[1]]++
		found := f.dlq[m[1]]
		delete(f.dlq, m[1])
		hold := found && !f.held
		f.held = f.held || hold
		f.mu.Unlock()
		if !found {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"dlq entry not found"}`))
			return
		}
		if hold {
			f.applied <- m[1]
			<-f.release
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"job_id": m[1] + "-retry-0a1b2c3d"})
	}))
	t.Cleanup(func() {
		select {
		case <-f.release:
		default:
			close(f.release)
		}
		f.Close()
	})
	return f
}

func slicesSorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k, in := range m {
		if in {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (f *crashCordum) calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.retries {
		out[k] = v
	}
	return out
}

// Issue 13: "a crash (SIGKILL) between the retry call and its recorded
// outcome ends, after the probe, with the entry committed and not called
// again". A reconcile process replays Cordum entries through Cordum's own
// retry endpoint; Cordum does the retry (the entry leaves its DLQ) and the
// process is killed before the answer reaches it, so its ledger holds the
// dispatch intent and no outcome. The next run recovers that dispatch,
// probes Cordum (the entry is gone from the DLQ: committed) and records it
// succeeded without calling retry for it again; the entries the killed run
// never reached are retried once each.
func TestCrashBetweenCordumRetryAndOutcome(t *testing.T) {
	jobs := []string{"job_k1", "job_k2", "job_k3"}
	f := newCrashCordum(t, jobs...)
	paths := newCrashPaths(t)
	var lines []string
	for _, id := range jobs {
		// A DLQEntry as Cordum stores it (core/infra/store/dlq_store.go): no payload.
		lines = append(lines, fmt.Sprintf(`{"job_id":%q,"topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason_code":"pool_overloaded","reason":"pool email overloaded","attempts":1,"created_at":"2026-11-20T10:00:00Z"}`, id))
	}
	if err := os.WriteFile(paths.source, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CORDUM_API_KEY", nativeCordumKey)
	c := startNativeChild(t, paths, f.URL)

	var killed string
	select {
	case killed = <-f.applied:
	case err := <-c.done:
		t.Fatalf("reconcile child ended before Cordum applied a retry: %v\n%s", err, c.out)
	case <-time.After(2 * time.Minute):
		t.Fatalf("no retry reached Cordum\n%s", c.out)
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-c.done; !killedBySIGKILL(err) {
		t.Fatalf("child not killed by SIGKILL: %v\n%s", err, c.out)
	}
	close(f.release)

	st, err := bolt.Open(paths.db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	er, err := replay.Find(ctx, st, "cordum:"+killed)
	if err != nil {
		t.Fatal(err)
	}
	key := er.Entry.IdempotencyKey
	if rec := ledgerRecord(t, st, key); rec == nil || rec.State != idempotency.Dispatching {
		t.Fatalf("after the kill, the ledger of %s: %+v, want the dispatch intent with no outcome", killed, rec)
	}

	eng, _, err := policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	src, err := source.Parse("cordum:" + paths.source)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := replay.ParseTarget("cordum:"+f.URL, "", replay.CredentialsFromEnv(os.Getenv))
	if err != nil {
		t.Fatal(err)
	}
	r := &replay.Reconciler{Engine: eng, Store: st, MaxParallel: 1, Actor: "cron", Router: replay.NewRulesRouter(eng.Rules, rt)}
	rep, err := r.Run(ctx, []source.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	calls := f.calls()
	if calls[killed] != 1 {
		t.Errorf("Cordum's retry for %s was called %d times, want 1 (the killed run's)", killed, calls[killed])
	}
	for _, id := range jobs {
		if calls[id] != 1 {
			t.Errorf("retry of %s called %d times, want 1", id, calls[id])
		}
		if rec := ledgerRecord(t, st, mustKey(t, st, id)); rec == nil || rec.State != idempotency.Succeeded {
			t.Errorf("%s: ledger %+v, want succeeded", id, rec)
		}
	}
	if rep.ProbedCommitted != 1 {
		t.Errorf("report: %d probed committed, want 1 (%+v)", rep.ProbedCommitted, rep)
	}
	if rec := ledgerRecord(t, st, key); rec == nil || rec.Replays != 1 {
		t.Errorf("%s: ledger %+v, want the one replay of the killed run", killed, rec)
	}

	// A further run calls Cordum for nothing.
	if _, err := r.Run(ctx, []source.Source{src}); err != nil {
		t.Fatal(err)
	}
	for id, n := range f.calls() {
		if n != 1 {
			t.Errorf("after a further run, retry of %s called %d times", id, n)
		}
	}
}

// startNativeChild re-executes the test binary as TestNativeCrashChild,
// as startCrashChild does for the reconcile child.
func startNativeChild(t *testing.T, paths crashPaths, url string) *crashChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNativeCrashChild$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), nativeChildEnv+"=1", crashDBEnv+"="+paths.db, crashSourceEnv+"="+paths.source, crashTargetEnv+"="+url)
	c := &crashChild{cmd: cmd, out: newChildOutput(), done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start reconcile child: %v", err)
	}
	go func() { c.done <- cmd.Wait() }()
	return c
}

func ledgerRecord(t *testing.T, st store.Backend, key string) *idempotency.Record {
	t.Helper()
	var out *idempotency.Record
	_ = st.LedgerRecords(context.Background(), func(r *idempotency.Record) error {
		if r.Key == key {
			rc := *r
			out = &rc
		}
		return nil
	})
	return out
}

func mustKey(t *testing.T, st store.Backend, id string) string {
	t.Helper()
	er, err := replay.Find(context.Background(), st, "cordum:"+id)
	if err != nil {
		t.Fatal(err)
	}
	return er.Entry.IdempotencyKey
}
