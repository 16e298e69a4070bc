package benchmark

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

// workerParallel is each worker's --max-parallel in the worker rows.
const workerParallel = 4

// workers measures replays/s with 1, 2 and 4 workers sharing one DLQ
// through PostgreSQL. Against a target answering in 10 ms a worker is
// bound by the target's latency, so workers must add up: the rows are
// ratios to one worker. Against a target answering at once the database is
// the bound, so each row is a ratio to bare single-row INSERT+COMMITs by
// as many connections as the workers have entries in flight, measured
// right after it (the least work a durable claim-and-record can cost).
// Every figure is the best of two runs (one with --quick), the worker
// counts alternating.
func workers(ctx context.Context, c *Config) ([]Row, error) {
	n := c.size(2_000, 120)
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
	if _, err := testsvc.PostgresDB(fmt.Sprintf("bench_probe_%d", time.Now().UnixNano())); err != nil {
		return []Row{{Measure: "replays with several workers", Note: "skipped: " + err.Error()}}, nil
	}
	defer testsvc.Stop()
	counts := []int{1, 2, 4}
	var rows []Row
	for _, latency := range []time.Duration{10 * time.Millisecond, 0} {
		s := slowSink(latency)
		got := map[int]float64{}
		base := map[int]float64{}
		trips := map[int]float64{}
		for round := range c.size(2, 1) {
			for _, w := range counts {
				c.progress(fmt.Sprintf("shared store: %d worker(s), target %v, round %d", w, latency, round+1))
				r, t, err := runWorkers(ctx, eng, src, s.URL, w, n)
				if err != nil {
					s.Close()
					return nil, err
				}
				if r > got[w] {
					got[w], trips[w] = r, t
				}
				if latency == 0 {
					b, err := bareInserts(ctx, w*workerParallel, n)
					if err != nil {
						s.Close()
						return nil, err
					}
					base[w] = max(base[w], b)
				}
			}
		}
		s.Close()
		for _, w := range counts {
			r := Row{Measure: fmt.Sprintf("replays, %d worker(s) on PostgreSQL, target answering in %v (replays/s)", w, latency), Figure: got[w], Unit: "/s"}
			switch {
			case latency > 0 && w > 1:
				r.Baseline, r.Ratio, r.Note = got[1], got[w]/got[1], fmt.Sprintf("of 1 worker; %.1f round trips per replay", trips[w])
				r.Target = fmt.Sprintf(">= %.1fx", map[int]float64{2: 1.8, 4: 3.5}[w])
			case latency == 0:
				r.Measure = fmt.Sprintf("replays, %d worker(s) on PostgreSQL, target answering at once (replays/s)", w)
				r.Baseline, r.Ratio = base[w], got[w]/base[w]
				r.Note = fmt.Sprintf("of bare INSERT+COMMIT, %d connections; %.1f round trips per replay", w*workerParallel, trips[w])
			default:
				r.Note = fmt.Sprintf("%.1f round trips per replay", trips[w])
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// slowSink is a target that answers 200 after latency.
func slowSink(latency time.Duration) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if latency > 0 {
			time.Sleep(latency)
		}
		w.WriteHeader(http.StatusOK)
	}))
}

// runWorkers drains n entries with w workers on a fresh database and
// returns replays/s and the round trips to the database per replay (every
// statement, batch, ingest, claim and sealing round included).
func runWorkers(ctx context.Context, eng *triage.Engine, src source.Source, target string, w, n int) (float64, float64, error) {
	dsn, err := testsvc.PostgresDB(fmt.Sprintf("bench_%d_%d", w, time.Now().UnixNano()))
	if err != nil {
		return 0, 0, err
	}
	defer dropDB(ctx, dsn)
	// The pool's default: a connection per slot, plus the sealer's, the
	// ingest lead's and the claim feed's.
	stores := make([]*postgres.Postgres, w)
	for i := range w {
		if stores[i], err = postgres.Open(ctx, dsn, store.Options{MaxBatchSize: workerParallel}); err != nil {
			return 0, 0, err
		}
		defer stores[i].Close()
	}
	var wg sync.WaitGroup
	errs := make([]error, w)
	done := make([]int, w)
	t0 := time.Now()
	for i := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &replay.Reconciler{Engine: eng, Store: stores[i], MaxParallel: workerParallel, Actor: "bench", Owner: fmt.Sprintf("w%d", i),
				Router: replay.NewRulesRouter(eng.Rules, &replay.Route{Name: "sink", Dispatcher: replay.NewHTTPTarget(target, "", 10*time.Second, nil)})}
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
	var trips int64
	for i := range w {
		if errs[i] != nil {
			return 0, 0, errs[i]
		}
		total += done[i]
		trips += stores[i].Trips().RoundTrips
	}
	if total != n {
		return 0, 0, fmt.Errorf("%d workers replayed %d of %d entries", w, total, n)
	}
	return rate(n, took), float64(trips) / float64(n), nil
}

// bareInserts is the database's floor: conns connections each inserting
// one row per transaction (autocommit), n rows in all; rows/s.
func bareInserts(ctx context.Context, conns, n int) (float64, error) {
	dsn, err := testsvc.PostgresDB(fmt.Sprintf("bench_bare_%d", time.Now().UnixNano()))
	if err != nil {
		return 0, err
	}
	defer dropDB(ctx, dsn)
	pool, err := pgxpool.New(ctx, dsn+fmt.Sprintf("&pool_max_conns=%d", conns))
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE t (id bigint PRIMARY KEY, body bytea NOT NULL)`); err != nil {
		return 0, err
	}
	body := make([]byte, 512)
	d, err := parallel(conns, n, func(i int) error {
		_, err := pool.Exec(ctx, `INSERT INTO t (id, body) VALUES ($1, $2)`, int64(i), body)
		return err
	})
	if err != nil {
		return 0, err
	}
	return rate(n, d), nil
}

// dropDB drops a run's database when the run is done (deferred after its
// pools close). Left in place, each was vacuumed and analyzed by
// autovacuum during the runs that followed it, on the same cores: a dozen
// databases of a few thousand updated rows by the 4-worker rows of the
// last round. A database that will not drop is left to testsvc.Stop.
func dropDB(ctx context.Context, dsn string) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return
	}
	name := cfg.Database
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}
