package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// TestSharedWorkerChild is a worker process of TestFourWorkersSurviveSIGKILL
// (the test binary re-executed); it does nothing in a normal run.
func TestSharedWorkerChild(t *testing.T) {
	if os.Getenv("REPLAYCTL_SHARED_CHILD") == "" {
		t.Skip("worker process of TestFourWorkersSurviveSIGKILL")
	}
	ctx := context.Background()
	eng, _, err := policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 0)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := postgres.Open(ctx, os.Getenv("REPLAYCTL_STORE"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	src, err := source.Parse("jsonl:" + os.Getenv("REPLAYCTL_SOURCE"))
	if err != nil {
		t.Fatal(err)
	}
	h := NewHTTPTarget(os.Getenv("REPLAYCTL_TARGET"), "", 5*time.Second, nil)
	r := &Reconciler{Engine: eng, Store: pg, Actor: "worker", Owner: os.Getenv("REPLAYCTL_OWNER"),
		MaxParallel: 8, Lease: time.Second, Router: NewRulesRouter(eng.Rules, &Route{Name: "sink", Dispatcher: h})}
	if _, err := r.Run(ctx, []source.Source{src}); err != nil {
		t.Fatal(err)
	}
}

func TestFourWorkersSurviveSIGKILL(t *testing.T) {
	entries, minKills := 10000, 50
	if testing.Short() {
		entries, minKills = 1000, 10
	}
	dsn := testsvc.Postgres(t)
	dir := t.TempDir()
	var sb strings.Builder
	for i := range entries {
		reason := "timeout"
		if i%20 == 0 {
			reason = "schema_invalid" // quarantined: every action must end decided
		}
		fmt.Fprintf(&sb, `{"id":"e%05d","topic":"tool.email.send","reason_code":%q,"idempotency_key":"k%05d","payload":{"n":%d}}`+"\n", i, reason, i, i)
	}
	srcPath := filepath.Join(dir, "dlq.jsonl")
	if err := os.WriteFile(srcPath, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	delivered := map[string]int{}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		delivered[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		time.Sleep(time.Millisecond) // slow enough for kills to land mid-dispatch
		w.WriteHeader(http.StatusOK)
	}))
	defer sink.Close()

	rng := rand.New(rand.NewPCG(7, 11))
	start := func(n int) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSharedWorkerChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "REPLAYCTL_SHARED_CHILD=1", "REPLAYCTL_STORE="+dsn, "REPLAYCTL_SOURCE="+srcPath,
			"REPLAYCTL_TARGET="+sink.URL, "REPLAYCTL_OWNER=worker-"+strconv.Itoa(n))
		cmd.Stdout, cmd.Stderr = nil, nil
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	type proc struct {
		cmd  *exec.Cmd
		done chan error
	}
	run := func(n int) proc {
		p := proc{cmd: start(n), done: make(chan error, 1)}
		go func() { p.done <- p.cmd.Wait() }()
		return p
	}
	workers := make([]proc, 4)
	for i := range workers {
		workers[i] = run(i)
	}
	kills, finished, generation := 0, 0, 4
	deadline := time.Now().Add(4 * time.Minute)
	for kills < minKills && time.Now().Before(deadline) {
		time.Sleep(time.Duration(20+rng.IntN(150)) * time.Millisecond)
		i := rng.IntN(len(workers))
		select {
		case err := <-workers[i].done:
			if err != nil {
				t.Fatalf("worker failed on its own: %v", err)
			}
			finished++
		default:
			_ = workers[i].cmd.Process.Signal(syscall.SIGKILL)
			<-workers[i].done
			kills++
		}
		workers[i] = run(generation)
		generation++
	}
	// Let the last workers finish; then, once every lease a killed worker
	// held has run out, one more worker picks up what is left.
	for _, w := range workers {
		if err := <-w.done; err != nil {
			t.Fatalf("worker failed: %v", err)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	final := run(generation)
	if err := <-final.done; err != nil {
		t.Fatalf("final worker: %v", err)
	}
	if kills < minKills {
		t.Fatalf("only %d kills happened before the deadline", kills)
	}

	ctx := context.Background()
	pg, err := postgres.Open(ctx, dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	f := checkCrashInvariants(t, pg, delivered, entries)
	states, unknown, twice := f.states, f.unknown, 0
	for k, c := range delivered {
		if c > 1 && !unknown[k] {
			twice++
		}
	}
	summary, _ := json.Marshal(states)
	t.Logf("%d entries, 4 workers, %d SIGKILLs, %d runs finished on their own; %d keys delivered, %d twice without an outcome_unknown record, %d outcome_unknown keys; ledger %s",
		entries, kills, finished, len(delivered), twice, len(unknown), summary)
}
