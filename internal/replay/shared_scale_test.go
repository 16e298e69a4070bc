package replay

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
)

// countedSource is a real source that counts how often it is read.
type countedSource struct {
	source.Source
	reads *atomic.Int32
}

func (c countedSource) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	c.reads.Add(1)
	return c.Source.Entries(ctx)
}

// Issue 16: every worker read and ingested every source. Of three workers
// starting a run together, one reads the sources; all three share the
// work, and every key is delivered once.
func TestOnlyTheIngestLeadReadsTheSources(t *testing.T) {
	b, pg := sharedBundle(t)
	var entries []map[string]any
	for i := range 150 {
		entries = append(entries, transient(fmt.Sprintf("e%03d", i), fmt.Sprintf("k%03d", i)))
	}
	var reads atomic.Int32
	src := countedSource{b.jsonl("dlq.jsonl", entries...), &reads}
	var wg sync.WaitGroup
	reps := make([]*Report, 3)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := b.worker(pg, fmt.Sprintf("w%d", w)).Run(context.Background(), []source.Source{src})
			if err != nil {
				t.Error(err)
			}
			reps[w] = rep
		}()
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Fatalf("the sources were read %d times in one run", n)
	}
	ingested, handled := 0, 0
	for _, r := range reps {
		ingested += r.Ingested
		handled += r.Summary.Total
	}
	got := b.sink.perKey()
	if ingested != len(entries) || handled != len(entries) || len(got) != len(entries) {
		t.Fatalf("ingested %d, handled %d, delivered %d keys of %d", ingested, handled, len(got), len(entries))
	}
	for k, n := range got {
		if n != 1 {
			t.Errorf("key %s delivered %d times", k, n)
		}
	}
}

// Issue 16: a worker claimed a batch and waited for all of it before
// claiming again, so one slow target call held every other slot idle.
// Here the first entry's call answers only once every other entry was
// delivered: with convoys it times out; claiming continuously, the other
// slots drain the rest meanwhile.
func TestWorkerClaimsContinuouslyNotInConvoys(t *testing.T) {
	b, pg := sharedBundle(t)
	entries := []map[string]any{transient("a-slow", "slow")}
	for i := range 30 {
		entries = append(entries, transient(fmt.Sprintf("e%03d", i), fmt.Sprintf("k%03d", i)))
	}
	others := make(chan struct{})
	var fast atomic.Int32
	var releasedByOthers atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "slow" {
			select {
			case <-others:
				releasedByOthers.Store(true)
			case <-time.After(5 * time.Second):
			}
		} else if fast.Add(1) == 30 {
			close(others)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer target.Close()
	r := b.worker(pg, "w0")
	r.MaxParallel = 3
	r.Router = NewRulesRouter(b.engine.Rules, &Route{Name: "sink", Dispatcher: NewHTTPTarget(target.URL, "", 30*time.Second, nil)})
	rep, err := r.Run(context.Background(), []source.Source{b.jsonl("dlq.jsonl", entries...)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replays.Succeeded != len(entries) {
		t.Fatalf("%d of %d replayed", rep.Replays.Succeeded, len(entries))
	}
	if !releasedByOthers.Load() {
		t.Fatal("the slow call timed out before the other entries were delivered: they waited for it (a convoy)")
	}
}
