package replay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

// TestBoltReconcileChild is the reconcile process of
// TestReconcileSurvivesSIGKILL (the test binary re-executed).
func TestBoltReconcileChild(t *testing.T) {
	if os.Getenv("REPLAYCTL_BOLT_CHILD") == "" {
		t.Skip("reconcile process of TestReconcileSurvivesSIGKILL")
	}
	ctx := context.Background()
	eng, _, err := policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenBolt(os.Getenv("REPLAYCTL_DB"), store.Options{LockTimeout: 10 * time.Second, MaxBatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	src, err := source.Parse("jsonl:" + os.Getenv("REPLAYCTL_SOURCE"))
	if err != nil {
		t.Fatal(err)
	}
	h := NewHTTPTarget(os.Getenv("REPLAYCTL_TARGET"), "", 5*time.Second, nil)
	r := &Reconciler{Engine: eng, Store: st, Actor: "cron", MaxParallel: 4,
		Router: NewRulesRouter(eng.Rules, &Route{Name: "sink", Dispatcher: h})}
	if _, err := r.Run(ctx, []source.Source{src}); err != nil {
		t.Fatal(err)
	}
}

// TestReconcileSurvivesSIGKILL kills reconcile at many points against a
// slow sink, restarts it each time, and proves: no key delivered twice
// without an outcome_unknown record, no entry lost, every dispatching
// record resolved on restart.
func TestReconcileSurvivesSIGKILL(t *testing.T) {
	n, minKills := 3000, 60
	if testing.Short() {
		n, minKills = 300, 15
	}
	dir := t.TempDir()
	var sb strings.Builder
	for i := range n {
		reason := "timeout"
		if i%10 == 0 {
			reason = "schema_invalid"
		}
		fmt.Fprintf(&sb, `{"id":"e%04d","topic":"tool.email.send","reason_code":%q,"idempotency_key":"k%04d","payload":{"n":%d}}`+"\n", i, reason, i, i)
	}
	srcPath := filepath.Join(dir, "dlq.jsonl")
	if err := os.WriteFile(srcPath, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "replayctl.db")
	var mu sync.Mutex
	delivered := map[string]int{}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		delivered[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		time.Sleep(3 * time.Millisecond) // slow: kills land between intent and outcome
		w.WriteHeader(http.StatusOK)
	}))
	defer sink.Close()

	rng := rand.New(rand.NewPCG(3, 5))
	start := func() (*exec.Cmd, chan error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBoltReconcileChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "REPLAYCTL_BOLT_CHILD=1", "REPLAYCTL_DB="+db, "REPLAYCTL_SOURCE="+srcPath, "REPLAYCTL_TARGET="+sink.URL)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return cmd, done
	}
	kills, completed := 0, 0
	deadline := time.Now().Add(3 * time.Minute)
	for kills < minKills && time.Now().Before(deadline) {
		cmd, done := start()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("reconcile failed on its own: %v", err)
			}
			completed++
		case <-time.After(time.Duration(10+rng.IntN(50)) * time.Millisecond):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			kills++
		}
	}
	// Runs to completion: the first recovers what the last kill left.
	for range 2 {
		_, done := start()
		if err := <-done; err != nil {
			t.Fatalf("final reconcile: %v", err)
		}
	}
	if kills < minKills {
		t.Fatalf("only %d kills before the deadline", kills)
	}

	st, err := store.OpenBolt(db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := checkCrashInvariants(t, st, delivered, n)
	t.Logf("%d entries, %d SIGKILLs, %d runs completed between kills; %d keys delivered, %d recoveries, %d outcome_unknown keys; ledger %v",
		n, kills, completed, len(delivered), f.recovered, len(f.unknown), f.states)
}
