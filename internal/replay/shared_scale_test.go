package replay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/triage"
)

// countedSource is a real source that counts how often it is read; before
// its entry number gateAt it waits for gate (or 5 s).
type countedSource struct {
	source.Source
	reads  *atomic.Int32
	gateAt int
	gate   <-chan struct{}
}

func (c countedSource) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	c.reads.Add(1)
	return func(yield func(entry.Entry, error) bool) {
		i := 0
		for e, err := range c.Source.Entries(ctx) {
			if i == c.gateAt {
				select {
				case <-c.gate:
				case <-time.After(5 * time.Second):
				}
			}
			i++
			if !yield(e, err) {
				return
			}
		}
	}
}

// Issue 16: every worker read and ingested every source. Of three workers
// starting a run together, one reads the sources; all three share the
// work, and every key is delivered once. The ingest finishes only after
// every worker handled an entry of its first batch, so all three runs
// began before it completed, however the machine schedules them.
func TestOnlyTheIngestLeadReadsTheSources(t *testing.T) {
	b, pg := sharedBundle(t)
	var entries []map[string]any
	for i := range ingestBatch + 20 {
		entries = append(entries, transient(fmt.Sprintf("e%03d", i), fmt.Sprintf("k%03d", i)))
	}
	var reads atomic.Int32
	allBusy := make(chan struct{})
	var busy [3]sync.Once
	var started sync.WaitGroup
	started.Add(3)
	go func() { started.Wait(); close(allBusy) }()
	src := countedSource{b.jsonl("dlq.jsonl", entries...), &reads, ingestBatch + 10, allBusy}
	var wg sync.WaitGroup
	reps := make([]*Report, 3)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := b.worker(pg, fmt.Sprintf("w%d", w))
			r.OnEntry = func(EntryResult) { busy[w].Do(started.Done) }
			rep, err := r.Run(context.Background(), []source.Source{src})
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
	// A worker whose run starts later re-checks what was checked before
	// it began (as before this change), so handled may exceed the count.
	if ingested != len(entries) || handled < len(entries) || len(got) != len(entries) {
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

// Issue 14's leftover on PostgreSQL: an idempotency key or id over the
// index limit failed every write of its entry. Such entries are replayed
// once like any other, and a second run sends nothing again.
func TestOversizedKeyAndIDOnPostgres(t *testing.T) {
	b, pg := sharedBundle(t)
	longKey, longID := incompressibleText("key", 40*1024), incompressibleText("id", 40*1024)
	src := b.jsonl("dlq.jsonl",
		transient("a1", "order-1:email"),
		transient("big-key", longKey),
		transient(longID, "order-2:email"))
	for range 2 {
		rep, err := b.worker(pg, "w0").Run(context.Background(), []source.Source{src})
		if err != nil {
			t.Fatal(err)
		}
		if rep.EntryErrors != 0 {
			t.Fatalf("%d entry errors", rep.EntryErrors)
		}
	}
	got := b.sink.perKey()
	for _, k := range []string{"order-1:email", "order-2:email", longKey} {
		if got[k] != 1 {
			t.Errorf("key %.20s… delivered %d times, want 1", k, got[k])
		}
	}
	if v, err := pg.LedgerView(context.Background(), longKey); err != nil || v.State != triage.StateSucceeded {
		t.Fatalf("long key ledger: %+v %v", v, err)
	}
}

// incompressibleText is n hex characters that do not compress below
// PostgreSQL's index limit.
func incompressibleText(seed string, n int) string {
	var sb strings.Builder
	sum := sha256.Sum256([]byte(seed))
	for sb.Len() < n {
		sb.WriteString(hex.EncodeToString(sum[:]))
		sum = sha256.Sum256(sum[:])
	}
	return sb.String()[:n]
}
