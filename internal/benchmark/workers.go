package benchmark

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// workers measures replays/s with 1, 2 and 4 workers sharing one DLQ
// through PostgreSQL, against the local sink, as ratios to one worker.
func workers(ctx context.Context, c *Config) ([]Row, error) {
	n := c.size(4_000, 200)
	spec, err := c.corpus("workers.jsonl", gen.Options{N: n, Seed: 5, AutoOnly: true})
	if err != nil {
		return nil, err
	}
	src, err := source.Parse(spec)
	if err != nil {
		return nil, err
	}
	eng, err := c.engine(ctx)
	if err != nil {
		return nil, err
	}
	s := sink()
	defer s.Close()
	var rows []Row
	var one float64
	for _, w := range []int{1, 2, 4} {
		c.progress(fmt.Sprintf("shared store: %d worker(s)", w))
		dsn, err := testsvc.PostgresDB(fmt.Sprintf("bench_%d_%d", w, time.Now().UnixNano()))
		if err != nil {
			return append(rows, Row{Measure: "replays with several workers", Note: "skipped: " + err.Error()}), nil
		}
		var wg sync.WaitGroup
		errs := make([]error, w)
		done := make([]int, w)
		t0 := time.Now()
		for i := range w {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pg, err := store.OpenPostgres(ctx, dsn, store.Options{})
				if err != nil {
					errs[i] = err
					return
				}
				defer pg.Close()
				r := &replay.Reconciler{Engine: eng, Store: pg, MaxParallel: 5, Actor: "bench", Owner: fmt.Sprintf("w%d", i),
					Router: replay.NewRulesRouter(eng.Rules, &replay.Route{Name: "sink", Dispatcher: replay.NewHTTPTarget(s.URL, "", 10*time.Second, nil)})}
				rep, err := r.Run(ctx, []source.Source{src})
				errs[i] = err
				if rep != nil {
					done[i] = rep.Replays.Succeeded
				}
			}()
		}
		wg.Wait()
		took := time.Since(t0)
		total := 0
		for i := range w {
			if errs[i] != nil {
				return nil, errs[i]
			}
			total += done[i]
		}
		if total != n {
			return nil, fmt.Errorf("%d workers replayed %d of %d entries", w, total, n)
		}
		r := Row{Measure: fmt.Sprintf("replays, %d worker(s) on PostgreSQL (replays/s)", w), Figure: rate(n, took), Unit: "/s"}
		if w == 1 {
			one = r.Figure
		} else {
			r.Baseline, r.Ratio, r.Note = one, r.Figure/one, "of 1 worker"
		}
		rows = append(rows, r)
	}
	testsvc.Stop()
	return rows, nil
}
