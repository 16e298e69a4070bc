package benchmark

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// workerParallel is each worker's --max-parallel.
const workerParallel = 5

// slowSink answers every POST after delay, like a real target would.
func slowSink(delay time.Duration) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(delay) // the target's own latency, not a test waiting
		w.WriteHeader(http.StatusOK)
	}))
}

// workers measures replays/s with 1, 2 and 4 workers sharing one DLQ
// through PostgreSQL against a target answering in 10 ms, as ratios to one
// worker (the rounds repeat, medians are compared); and the database-bound
// case, 4 workers against a target answering at once, as a ratio to bare
// single-row INSERT+COMMIT at the same concurrency.
func workers(ctx context.Context, c *Config) ([]Row, error) {
	n := c.size(4_000, 40)
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
	slow, fast := slowSink(10*time.Millisecond), sink()
	defer slow.Close()
	defer fast.Close()
	db := 0
	freshDB := func() (string, error) {
		db++
		return testsvc.PostgresDB(fmt.Sprintf("bench_%d_%d", db, time.Now().UnixNano()))
	}
	// run replays the DLQ with w workers against the target at url.
	run := func(w int, url string) (time.Duration, error) {
		dsn, err := freshDB()
		if err != nil {
			return 0, err
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
				r := &replay.Reconciler{Engine: eng, Store: pg, MaxParallel: workerParallel, Actor: "bench", Owner: fmt.Sprintf("w%d", i),
					Router: replay.NewRulesRouter(eng.Rules, &replay.Route{Name: "sink", Dispatcher: replay.NewHTTPTarget(url, "", 10*time.Second, nil)})}
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
				return 0, errs[i]
			}
			total += done[i]
		}
		if total != n {
			return 0, fmt.Errorf("%d workers replayed %d of %d entries", w, total, n)
		}
		return took, nil
	}

	counts := []int{1, 2, 4}
	times := map[int][]float64{}
	for round := range c.size(3, 1) {
		for _, w := range counts {
			c.progress(fmt.Sprintf("shared store: %d worker(s), 10 ms target, round %d", w, round+1))
			took, err := run(w, slow.URL)
			if err != nil {
				if db == 1 {
					return []Row{{Measure: "replays with several workers", Note: "skipped: " + err.Error()}}, nil
				}
				return nil, err
			}
			times[w] = append(times[w], float64(took))
		}
	}
	var rows []Row
	one := rate(n, time.Duration(median(times[1])))
	for _, w := range counts {
		r := Row{Measure: fmt.Sprintf("replays, %d worker(s) on PostgreSQL, 10 ms target (replays/s)", w),
			Figure: rate(n, time.Duration(median(times[w]))), Unit: "/s"}
		if w > 1 {
			r.Baseline, r.Ratio, r.Note = one, r.Figure/one, "of 1 worker"
			r.Target = map[int]string{2: ">= 1.8x", 4: ">= 3.5x"}[w]
		}
		rows = append(rows, r)
	}

	// Database-bound: the target costs nothing, so the store is the limit.
	const w = 4
	bare := func() (time.Duration, error) {
		dsn, err := freshDB()
		if err != nil {
			return 0, err
		}
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			return 0, err
		}
		defer pool.Close()
		if _, err := pool.Exec(ctx, `CREATE TABLE bare (id bigint PRIMARY KEY, body text NOT NULL)`); err != nil {
			return 0, err
		}
		return parallel(w*workerParallel, n, func(i int) error {
			// Autocommit: one row, one commit, as each replay needs at least.
			_, err := pool.Exec(ctx, `INSERT INTO bare (id, body) VALUES ($1, $2)`, i, "x")
			return err
		})
	}
	c.progress("shared store: 4 workers, database-bound vs bare INSERT+COMMIT")
	b, o, err := paired(c.size(3, 1), bare, func() (time.Duration, error) { return run(w, fast.URL) })
	if err != nil {
		return nil, err
	}
	rows = append(rows, Row{Measure: fmt.Sprintf("replays, %d workers on PostgreSQL, instant target (replays/s)", w),
		Figure: rate(n, o), Unit: "/s", Baseline: rate(n, b), Ratio: b.Seconds() / o.Seconds(),
		Note: fmt.Sprintf("of bare single-row INSERT+COMMIT, %d connections", w*workerParallel), Target: "reported"})
	testsvc.Stop()
	return rows, nil
}
