package benchmark

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/trace"
	"syscall"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/source"
)

// BenchmarkSafeCPU measures the two sides of `bench --only safe` on the
// same corpus, one side per sub-benchmark: the minimal safe replay
// (floor.go:decideWriteAndPost) and reconcile (safe.go:reconcileOnce). On
// the shared 2-core machine rates swing with the other processes' load;
// what each side costs does not, so it reports
//   - cpu-µs/op: the process's CPU time per replay (the sink's included);
//   - idle-share: the share of the run in which the Go scheduler had
//     nothing to run on a CPU it held (waits on fsync, on a window's
//     members, on answers): CPU the side left unused.
//
// As in `bench --only safe`, the floor's corpus stays in memory while
// reconcile runs. The run is a trace region ("run") for `-test.trace`.
//
//	go test -run '^$' -bench 'SafeCPU/par8' -benchtime 20000x ./internal/benchmark/
func BenchmarkSafeCPU(b *testing.B) {
	for _, par := range []int{1, 8} {
		for _, side := range []string{"floor", "reconcile"} {
			b.Run(fmt.Sprintf("par%d/%s", par, side), func(b *testing.B) {
				ctx := context.Background()
				c := &Config{Dir: b.TempDir(), Rules: "../../rules.yaml", Policies: "../../policies"}
				spec, bare, lines, err := c.replayCorpus(ctx, b.N)
				if err != nil {
					b.Fatal(err)
				}
				s := sink()
				defer s.Close()
				var run func() (time.Duration, error)
				if side == "floor" {
					send := poster(s.URL)
					run = func() (time.Duration, error) {
						return decideWriteAndPost(ctx, bare, lines, par, filepath.Join(c.Dir, "floor.db"), send)
					}
				} else {
					src, err := source.Parse(spec)
					if err != nil {
						b.Fatal(err)
					}
					eng, err := c.engine(ctx)
					if err != nil {
						b.Fatal(err)
					}
					run = func() (time.Duration, error) {
						return reconcileOnce(ctx, eng, src, s.URL, par, b.N, filepath.Join(c.Dir, "replay.db"))
					}
				}
				b.ResetTimer()
				cpu0 := processCPU()
				idle0, total0 := schedIdle()
				var runErr error
				trace.WithRegion(ctx, "run", func() { _, runErr = run() })
				if runErr != nil {
					b.Fatal(runErr)
				}
				idle1, total1 := schedIdle()
				b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
				b.ReportMetric((idle1-idle0)/(total1-total0), "idle-share")
				runtime.KeepAlive(lines)
			})
		}
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

// schedIdle is the Go scheduler's idle CPU time and its total CPU time
// (GOMAXPROCS times the wall time) so far.
func schedIdle() (idle, total float64) {
	ms := []metrics.Sample{{Name: "/cpu/classes/idle:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"}}
	metrics.Read(ms)
	return ms[0].Value.Float64(), ms[1].Value.Float64()
}
