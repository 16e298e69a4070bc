package benchmark

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// safe compares reconcile with the minimal safe replay (floor's durable
// row: bare decode, bare prepared eval, fsynced bare-bbolt intents before
// and outcomes after each window, the POST) directly, at 1, 8 and 32
// parallel, the two alternating round by round (paired) on the same
// corpus, sink and disk (issue 33's target: reconcile >= 0.8x of it).
// The floor and replays rows measure each against its own baselines in
// separate runs; this row puts the two in one.
func safe(ctx context.Context, c *Config) ([]Row, error) {
	n := c.size(10_000, 300)
	rounds := c.size(3, 1)
	c.progress("reconcile vs the minimal safe replay")
	spec, bare, lines, err := c.replayCorpus(ctx, n)
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
	run := 0
	for _, par := range []int{1, 8, 32} {
		c.progress(fmt.Sprintf("reconcile vs the minimal safe replay: %d parallel", par))
		send := poster(s.URL)
		floorRun := func() (time.Duration, error) {
			run++
			return decideWriteAndPost(ctx, bare, lines, par, filepath.Join(c.Dir, fmt.Sprintf("safe-floor-%d-%d.db", par, run)), send)
		}
		ours := func() (time.Duration, error) {
			run++
			return reconcileOnce(ctx, eng, src, s.URL, par, n, filepath.Join(c.Dir, fmt.Sprintf("safe-replay-%d-%d.db", par, run)))
		}
		f, o, err := paired(rounds, floorRun, ours)
		if err != nil {
			return nil, err
		}
		rows = append(rows, Row{Measure: fmt.Sprintf("reconcile vs the minimal safe replay, %d parallel (replays/s)", par),
			Figure: rate(n, o), Unit: "/s", Baseline: rate(n, f), Ratio: f.Seconds() / o.Seconds(),
			Note: "of the minimal safe replay (floor's durable row), alternating", Target: ">= 0.8x"})
	}
	return rows, nil
}

// reconcileOnce runs reconcile over src into a new bbolt file at path,
// sending every entry to url, and returns how long the run took.
func reconcileOnce(ctx context.Context, eng *triage.Engine, src source.Source, url string, par, n int, path string) (time.Duration, error) {
	st, err := bolt.Open(path, store.Options{MaxBatchSize: par})
	if err != nil {
		return 0, err
	}
	r := &replay.Reconciler{Engine: eng, Store: st, MaxParallel: par, Actor: "bench",
		Router: replay.NewRulesRouter(eng.Rules, &replay.Route{Name: "sink", Dispatcher: replay.NewHTTPTarget(url, "", 10*time.Second, nil)})}
	t0 := time.Now()
	rep, err := r.Run(ctx, []source.Source{src})
	d := time.Since(t0)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	if rep.Replays.Succeeded != n {
		return 0, fmt.Errorf("replay bench: %d of %d replayed (%+v)", rep.Replays.Succeeded, n, rep.Replays)
	}
	return d, nil
}
