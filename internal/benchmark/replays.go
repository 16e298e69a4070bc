package benchmark

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"time"

	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
)

func sink() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
}

// poster POSTs a body to url with the keep-alive client reconcile's HTTP
// targets use, and reads the answer through: a plain POST, the replay
// rows' first baseline.
func poster(url string) func(body []byte) error {
	client := replay.NewHTTPTarget(url, "", 10*time.Second, nil).Client
	h := http.Header{"Content-Type": {"application/json"}}
	return func(body []byte) error {
		if _, res := client.Send(context.Background(), http.MethodPost, url, h, body, 0); res != nil {
			return errors.New(res.Detail)
		}
		return nil
	}
}

// replays compares reconcile with the full safety path (intents durable
// before the POSTs, outcomes after) with two baselines in the same run, at
// 1, 8 and 32 parallel, rounds alternating so that the machine's noise
// falls on all three alike (medians of the rounds):
//   - plain POSTs of the same payloads to the same local sink, with the
//     same keep-alive client, at the same parallelism;
//   - bare bbolt doing the same durable writes as reconcile: per window of
//     entries one fsynced transaction putting each entry's ledger record,
//     audit record and entry (the intents), then one more (the outcomes).
func replays(ctx context.Context, c *Config) ([]Row, error) {
	n := c.size(10_000, 300)
	rounds := c.size(3, 1)
	c.progress("replay throughput: reconcile vs plain HTTP POSTs vs bare bbolt")
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
	run := 0
	for _, par := range []int{1, 8, 32} {
		var posts, ours, bare []time.Duration
		for range rounds {
			c.progress(fmt.Sprintf("replay throughput: %d parallel, round %d", par, len(ours)+1))
			send := poster(s.URL)
			d, err := parallel(par, len(payloads), func(i int) error { return send(payloads[i]) })
			if err != nil {
				return nil, err
			}
			posts = append(posts, d)

			run++
			d, err = reconcileOnce(ctx, eng, src, s.URL, par, n, filepath.Join(c.Dir, fmt.Sprintf("replay-%d.db", run)))
			if err != nil {
				return nil, err
			}
			ours = append(ours, d)

			d, err = bareWindows(filepath.Join(c.Dir, fmt.Sprintf("replay-bare-%d.db", run)), payloads, (&replay.Reconciler{MaxParallel: par}).WindowSize())
			if err != nil {
				return nil, err
			}
			bare = append(bare, d)
		}
		o, p, b := medianDuration(ours), medianDuration(posts), medianDuration(bare)
		rows = append(rows,
			Row{Measure: fmt.Sprintf("replay throughput, %d parallel (replays/s)", par), Figure: rate(n, o), Unit: "/s",
				Baseline: rate(n, p), Ratio: p.Seconds() / o.Seconds(), Note: "of plain POSTs", Target: ">= 0.5x"},
			Row{Measure: fmt.Sprintf("replay durable writes, %d parallel (replays/s)", par), Figure: rate(n, o), Unit: "/s",
				Baseline: rate(n, b), Ratio: b.Seconds() / o.Seconds(), Note: "of bare bbolt, same writes", Target: ">= 0.7x"})
	}
	return rows, nil
}

// bareWindows writes what reconcile makes durable for each replayed entry
// (intent: ledger record, audit record, entry; outcome: the same three),
// with nothing else: per window of entries, one bbolt transaction for the
// intents and one for the outcomes, each fsynced.
func bareWindows(path string, payloads [][]byte, window int) (time.Duration, error) {
	db, err := openBare(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	t0 := time.Now()
	for lo := 0; lo < len(payloads); lo += window {
		w := []win{{lo: lo, bodies: payloads[lo:min(lo+window, len(payloads))]}}
		if err := db.write(w); err != nil { // the intents
			return 0, err
		}
		if err := db.write(w); err != nil { // the outcomes
			return 0, err
		}
	}
	return time.Since(t0), nil
}
