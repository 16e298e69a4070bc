package benchmark

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"time"

	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

func sink() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
}

// replays compares reconcile with the full safety path (intent fsynced
// before the POST, outcome after) with plain POSTs of the same payloads to
// the same local sink at the same parallelism: 1, 8 and 32. Runs
// alternate, reconcile's each on a fresh ledger, and medians are compared.
func replays(ctx context.Context, c *Config) ([]Row, error) {
	n := c.size(10_000, 60)
	spec, err := c.corpus("replay.jsonl", gen.Options{N: n, Seed: 2, AutoOnly: true})
	if err != nil {
		return nil, err
	}
	src, err := source.Parse(spec)
	if err != nil {
		return nil, err
	}
	var payloads [][]byte
	for e, err := range src.Entries(ctx) {
		if err != nil {
			return nil, err
		}
		payloads = append(payloads, e.Payload)
	}
	eng, err := c.engine(ctx)
	if err != nil {
		return nil, err
	}
	s := sink()
	defer s.Close()
	var rows []Row
	for _, par := range []int{1, 8, 32} {
		c.progress(fmt.Sprintf("replay throughput: reconcile vs plain HTTP POSTs, %d parallel", par))
		client := replay.NewHTTPTarget(s.URL, "", 10*time.Second, nil).Client
		plain := func() (time.Duration, error) {
			return parallel(par, len(payloads), func(i int) error {
				resp, err := client.Post(s.URL, "application/json", bytes.NewReader(payloads[i]))
				if err != nil {
					return err
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				return resp.Body.Close()
			})
		}
		run, done := 0, 0
		ours := func() (time.Duration, error) {
			run++
			st, err := store.OpenBolt(filepath.Join(c.Dir, fmt.Sprintf("replay-%d-%d.db", par, run)), store.Options{MaxBatchSize: par})
			if err != nil {
				return 0, err
			}
			defer st.Close()
			r := &replay.Reconciler{Engine: eng, Store: st, MaxParallel: par, Actor: "bench",
				Router: replay.NewRulesRouter(eng.Rules, &replay.Route{Name: "sink", Dispatcher: replay.NewHTTPTarget(s.URL, "", 10*time.Second, nil)})}
			t0 := time.Now()
			rep, err := r.Run(ctx, []source.Source{src})
			took := time.Since(t0)
			if err != nil {
				return 0, err
			}
			done = rep.Replays.Succeeded
			return took, nil
		}
		b, o, err := paired(c.size(3, 1), plain, ours)
		if err != nil {
			return nil, err
		}
		if done != len(payloads) {
			return nil, fmt.Errorf("reconcile at %d parallel replayed %d of %d entries", par, done, len(payloads))
		}
		rows = append(rows, Row{Measure: fmt.Sprintf("replay throughput, %d parallel (replays/s)", par), Figure: rate(done, o), Unit: "/s",
			Baseline: rate(len(payloads), b), Ratio: b.Seconds() / o.Seconds(), Note: "of plain POSTs", Target: ">= 0.5x"})
	}
	return rows, nil
}
