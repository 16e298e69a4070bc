package replay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
)

// countingStore counts the read-write transactions a run commits; its Tx
// can be told to refuse one key's dispatch intent.
type countingStore struct {
	*store.Bolt
	updates atomic.Int64
	failKey string
}

func (c *countingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	c.updates.Add(1)
	return c.Bolt.Update(ctx, func(tx store.Tx) error { return fn(&failingTx{Tx: tx, key: c.failKey}) })
}

// UpdateNow is the grouped commit (a window's intents or outcomes).
func (c *countingStore) UpdateNow(ctx context.Context, fn func(store.Tx) error) error {
	c.updates.Add(1)
	return c.Bolt.UpdateNow(ctx, func(tx store.Tx) error { return fn(&failingTx{Tx: tx, key: c.failKey}) })
}

type failingTx struct {
	store.Tx
	key string
}

var errRefusedIntent = errors.New("test store refuses this key's intent")

func (t *failingTx) Transition(tr idempotency.Transition) (idempotency.Record, error) {
	if t.key != "" && tr.Key == t.key && tr.To == idempotency.Dispatching {
		return idempotency.Record{}, errRefusedIntent
	}
	return t.Tx.Transition(tr)
}

// Issue 16: a run writes the dispatch intents of a window of entries in one
// transaction, dispatches them, then writes their outcomes together. Seen
// from the target: when any key of a window arrives, every key of that
// window is already durably dispatching (no dispatch without an intent,
// and no outcome is written before the window's last dispatch), and the
// run commits far fewer transactions than two per entry.
func TestWindowWritesIntentsBeforeAnyDispatchAndOutcomesTogether(t *testing.T) {
	b := newBundle(t, baseRules)
	const n = 63 // windows of 1, 2, 4, 8, 16 and 32 entries (slow start)
	var entries []map[string]any
	index := map[string]int{}
	for i := range n {
		key := fmt.Sprintf("k%02d", i)
		index[key] = i
		entries = append(entries, transient(fmt.Sprintf("e%02d", i), key))
	}
	var violations []string
	b.sink.status = func(key string, _ int) int {
		lo, size := 0, 1
		for lo+size <= index[key] {
			lo, size = lo+size, size*2
		}
		for i := lo; i < min(lo+size, n); i++ {
			k := fmt.Sprintf("k%02d", i)
			rec, err := b.store.LedgerView(context.Background(), k)
			if err != nil || rec.State != string(idempotency.Dispatching) {
				violations = append(violations, fmt.Sprintf("at the dispatch of %s, %s (same window) is %q", key, k, rec.State))
			}
		}
		return http.StatusOK
	}
	cs := &countingStore{Bolt: b.store}
	r := b.reconciler(1)
	r.Store = cs
	rep := b.run(r, b.jsonl("dlq.jsonl", entries...))
	if rep.Replays.Succeeded != n {
		t.Fatalf("replayed %d of %d: %+v", rep.Replays.Succeeded, n, rep.Replays)
	}
	for _, v := range violations[:min(len(violations), 5)] {
		t.Error(v)
	}
	// Per entry: an intent and an outcome commit (2n); windowed: two per window.
	if got := cs.updates.Load(); got >= n {
		t.Errorf("%d read-write transactions for %d replays, want fewer than one per entry", got, n)
	}
	for k, c := range b.sink.perKey() {
		if c != 1 {
			t.Errorf("key %s delivered %d times", k, c)
		}
	}
	for i := range n {
		if v := b.ledger(fmt.Sprintf("k%02d", i)); v.State != string(idempotency.Succeeded) {
			t.Errorf("k%02d: ledger %s", i, v.State)
		}
	}
}

// One entry whose intent cannot be written fails its window's grouped
// transaction: each intent is then written alone, so that entry alone is
// quarantined (never dispatched) and the rest of its window goes out once.
func TestWindowIsolatesAnEntryWhoseIntentFails(t *testing.T) {
	b := newBundle(t, baseRules)
	var entries []map[string]any
	for i := range 7 { // windows of 1, 2, 4: k05 shares one with k03, k04, k06
		entries = append(entries, transient(fmt.Sprintf("e%d", i), fmt.Sprintf("k%02d", i)))
	}
	cs := &countingStore{Bolt: b.store, failKey: "k05"}
	r := b.reconciler(2)
	r.Store = cs
	rep := b.run(r, b.jsonl("dlq.jsonl", entries...))
	if rep.Replays.Succeeded != 6 || rep.EntryErrors != 1 {
		t.Fatalf("report %+v, entry errors %d", rep.Replays, rep.EntryErrors)
	}
	got := b.sink.perKey()
	if got["k05"] != 0 {
		t.Fatalf("k05 dispatched %d times without a durable intent", got["k05"])
	}
	for i := range 7 {
		if k := fmt.Sprintf("k%02d", i); k != "k05" && got[k] != 1 {
			t.Errorf("key %s delivered %d times, want 1", k, got[k])
		}
	}
	if er := b.entry("jsonl:e5"); er.Status != store.StatusQuarantined {
		t.Fatalf("e5: %s %q", er.Status, er.Reason)
	}
	if v := b.ledger("k05"); v.State == string(idempotency.Dispatching) {
		t.Fatalf("k05 left dispatching")
	}
}

// A window decides many entries at once, but what it sends stays within
// --max-parallel: the target never sees more requests at once.
func TestWindowSendsAtMostMaxParallelAtOnce(t *testing.T) {
	b := newBundle(t, baseRules)
	var inflight, most atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(2 * time.Millisecond) // the target's own work: lets sends overlap if unbounded
		inflight.Add(-1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	var entries []map[string]any
	for i := range 31 { // windows of 1, 2, 4, 8 and 16
		entries = append(entries, transient(fmt.Sprintf("e%d", i), fmt.Sprintf("k%02d", i)))
	}
	r := b.reconciler(2)
	r.Router = NewRulesRouter(b.engine.Rules, &Route{Name: "slow", Dispatcher: NewHTTPTarget(srv.URL, "", 5*time.Second, nil)})
	rep := b.run(r, b.jsonl("dlq.jsonl", entries...))
	if rep.Replays.Succeeded != 31 {
		t.Fatalf("report %+v", rep.Replays)
	}
	if m := most.Load(); m > 2 {
		t.Fatalf("the target saw %d requests at once, want at most --max-parallel 2", m)
	}
}
