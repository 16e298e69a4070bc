package benchmark

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
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
// the same local sink at the same parallelism.
func replays(ctx context.Context, c *Config) ([]Row, error) {
	const par = 5
	n := c.size(10_000, 300)
	c.progress("replay throughput: reconcile vs plain HTTP POSTs")
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
	s := sink()
	defer s.Close()
	client := replay.NewHTTPTarget(s.URL, "", 10*time.Second, nil).Client
	base, err := parallel(par, len(payloads), func(i int) error {
		resp, err := client.Post(s.URL, "application/json", bytes.NewReader(payloads[i]))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	})
	if err != nil {
		return nil, err
	}
	eng, err := c.engine(ctx)
	if err != nil {
		return nil, err
	}
	st, err := store.OpenBolt(filepath.Join(c.Dir, "replay.db"), store.Options{MaxBatchSize: par})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	r := &replay.Reconciler{Engine: eng, Store: st, MaxParallel: par, Actor: "bench",
		Router: replay.NewRulesRouter(eng.Rules, &replay.Route{Name: "sink", Dispatcher: replay.NewHTTPTarget(s.URL, "", 10*time.Second, nil)})}
	t0 := time.Now()
	rep, err := r.Run(ctx, []source.Source{src})
	ours := time.Since(t0)
	if err != nil {
		return nil, err
	}
	_ = entry.KindJSONL
	return []Row{{Measure: "replay throughput, 5 parallel (replays/s)", Figure: rate(rep.Replays.Succeeded, ours), Unit: "/s",
		Baseline: rate(len(payloads), base), Ratio: base.Seconds() / ours.Seconds(), Note: "of plain POSTs"}}, nil
}
