package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// BenchmarkReconcileTransient reconciles b.N fresh transient entries (each
// one auto_replay) against a local httptest sink: the profile of a run's
// durable writes and dispatches (issue 16, "replay bounded by the target").
//
//	go test -run '^$' -bench ReconcileTransient -benchtime 3000x -cpuprofile cpu.out ./internal/replay/
func BenchmarkReconcileTransient(b *testing.B) {
	for _, par := range []int{1, 8} {
		b.Run(fmt.Sprintf("par%d", par), func(b *testing.B) {
			dir := b.TempDir()
			rp := filepath.Join(dir, "rules.yaml")
			if err := os.WriteFile(rp, []byte(baseRules), 0o644); err != nil {
				b.Fatal(err)
			}
			eng, _, err := policy.LoadEngine(context.Background(), rp, "../../policies", 0)
			if err != nil {
				b.Fatal(err)
			}
			st, err := bolt.Open(filepath.Join(dir, "replayctl.db"), store.Options{MaxBatchSize: par})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusOK)
			}))
			defer srv.Close()
			var sb strings.Builder
			for i := range b.N {
				line, _ := json.Marshal(transient(fmt.Sprintf("e%d", i), fmt.Sprintf("order-%d:email", i)))
				sb.Write(line)
				sb.WriteByte('\n')
			}
			p := filepath.Join(dir, "dlq.jsonl")
			if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
				b.Fatal(err)
			}
			src, err := source.Parse("jsonl:" + p)
			if err != nil {
				b.Fatal(err)
			}
			h := NewHTTPTarget(srv.URL, "", 5*time.Second, nil)
			r := &Reconciler{Engine: eng, Store: st, Actor: "bench", MaxParallel: par,
				Router: NewRulesRouter(eng.Rules, &Route{Name: "sink", Dispatcher: h})}
			b.ResetTimer()
			cpu0 := processCPU()
			rep, err := r.Run(context.Background(), []source.Source{src})
			if err != nil {
				b.Fatal(err)
			}
			// CPU per entry (the sink's included): wall time is mostly
			// fsync waits and swings with the shared machine's load.
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			if rep.Replays.Succeeded != b.N {
				b.Fatalf("%d of %d replayed", rep.Replays.Succeeded, b.N)
			}
		})
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
