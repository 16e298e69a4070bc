package replay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// countingStore counts the read-write transactions a run commits; its Tx
// can be told to refuse one key's dispatch intent.
type countingStore struct {
	*bolt.Bolt
	updates atomic.Int64
	failKey string
}

func (c *countingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	c.updates.Add(1)
	return c.Bolt.Update(ctx, func(tx store.Tx) error { return fn(&failingTx{Tx: tx, key: c.failKey}) })
}

// UpdateGroup is the grouped commit (a window's intents or outcomes).
func (c *countingStore) UpdateGroup(ctx context.Context, fns []func(store.Tx) error) []error {
	c.updates.Add(1)
	wrapped := make([]func(store.Tx) error, len(fns))
	for i, fn := range fns {
		wrapped[i] = func(tx store.Tx) error { return fn(&failingTx{Tx: tx, key: c.failKey}) }
	}
	return c.Bolt.UpdateGroup(ctx, wrapped)
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

// viewSignal is the bbolt store, closing read when its nth read transaction
// (through the runner's Store) is done.
type viewSignal struct {
	*bolt.Bolt
	views atomic.Int64
	nth   int64
	read  chan struct{}
}

func (v *viewSignal) View(ctx context.Context, fn func(store.Tx) error) error {
	err := v.Bolt.View(ctx, fn)
	if v.views.Add(1) == v.nth {
		close(v.read)
	}
	return err
}

// A window reads and decides the next window's entries while it
// dispatches (issue 16). A person who resolves one of those entries after
// it was read and before its window runs wins: its intent is refused, it
// is not sent, and it stays resolved.
func TestWindowReadAheadYieldsToAHoldPutMeanwhile(t *testing.T) {
	b := newBundle(t, baseRules)
	// Run 1 stores e1 pending with a retry scheduled (503), so that a
	// person can resolve it.
	b.sink.status = func(key string, _ int) int {
		if key == "k1" {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	b.run(b.reconciler(1), b.jsonl("first.jsonl", transient("e1", "k1")))
	if er := b.entry("jsonl:e1"); er.Status != store.StatusPending {
		t.Fatalf("after run 1, e1 is %s", er.Status)
	}
	b.clock.now = b.clock.now.Add(time.Hour) // e1's retry is due
	// Run 2: window [e2], while e1 is read ahead (the run's second read
	// transaction); once it was read, e2's dispatch makes a person resolve e1.
	vs := &viewSignal{Bolt: b.store, nth: 2, read: make(chan struct{})}
	resolveErr := b.resolveOnceReadAhead(vs, "k2", "jsonl:e1")
	r := b.reconciler(1)
	r.Store = vs
	b.run(r, b.jsonl("second.jsonl", transient("e2", "k2"), transient("e1", "k1")))
	if err := resolveErr(); err != nil {
		t.Fatal(err)
	}
	if n := b.sink.perKey()["k1"]; n != 1 {
		t.Fatalf("k1 sent %d times, want only run 1's attempt: the resolve came before its window", n)
	}
	if er := b.entry("jsonl:e1"); er.Status != store.StatusResolved || er.Hold != store.HoldResolved {
		t.Fatalf("e1 is %s (hold %q), want resolved", er.Status, er.Hold)
	}
}

// countingPolicy counts the policy evaluations of a run.
type countingPolicy struct {
	triage.Policy
	evals atomic.Int64
}

func (c *countingPolicy) Evaluate(ctx context.Context, in *triage.PolicyInput) (triage.PolicyResult, error) {
	c.evals.Add(1)
	return c.Policy.Evaluate(ctx, in)
}

// Issue 16: a window reads the ledger records and stored entries of all
// its entries in one read transaction (not three per entry: recovery
// state, ledger view, entry), and each entry is decided once in the run.
func TestWindowReadsOncePerWindowAndDecidesOncePerEntry(t *testing.T) {
	b := newBundle(t, baseRules)
	const n = 63 // windows of 1, 2, 4, 8, 16 and 32
	var entries []map[string]any
	for i := range n {
		entries = append(entries, transient(fmt.Sprintf("e%02d", i), fmt.Sprintf("k%02d", i)))
	}
	cp := &countingPolicy{Policy: b.engine.Policy}
	eng := *b.engine
	eng.Policy = cp
	vs := &viewSignal{Bolt: b.store, nth: -1}
	r := b.reconciler(4)
	r.Engine, r.Store = &eng, vs
	rep := b.run(r, b.jsonl("dlq.jsonl", entries...))
	if rep.Replays.Succeeded != n {
		t.Fatalf("replayed %d of %d: %+v", rep.Replays.Succeeded, n, rep.Replays)
	}
	if got := vs.views.Load(); got > 6 {
		t.Errorf("%d read transactions for %d entries in 6 windows, want one per window", got, n)
	}
	if got := cp.evals.Load(); got != n {
		t.Errorf("%d policy evaluations for %d entries, want one each", got, n)
	}
}

// intentSignal is the bbolt store, closing written once a grouped
// transaction that wrote key's dispatch intent was committed.
type intentSignal struct {
	*bolt.Bolt
	key     string
	once    sync.Once
	written chan struct{}
}

type intentTx struct {
	store.Tx
	key string
	saw *bool
}

func (t *intentTx) Transition(tr idempotency.Transition) (idempotency.Record, error) {
	if tr.Key == t.key && tr.To == idempotency.Dispatching {
		*t.saw = true
	}
	return t.Tx.Transition(tr)
}

func (s *intentSignal) UpdateGroup(ctx context.Context, fns []func(store.Tx) error) []error {
	saw := make([]bool, len(fns))
	wrapped := make([]func(store.Tx) error, len(fns))
	for i, fn := range fns {
		wrapped[i] = func(tx store.Tx) error { return fn(&intentTx{Tx: tx, key: s.key, saw: &saw[i]}) }
	}
	errs := s.Bolt.UpdateGroup(ctx, wrapped)
	for i, err := range errs {
		if err == nil && saw[i] {
			s.once.Do(func() { close(s.written) })
		}
	}
	return errs
}

// Issue 16: once windows reach full size, the next window's intents are
// written while the current one dispatches (its outcomes not yet written),
// so that writes and dispatches overlap; what is sent stays within
// --max-parallel across both windows, and every invariant of one entry
// holds: each key is sent once, after its intent.
func TestWindowNextWindowWritesIntentsWhileThisOneDispatches(t *testing.T) {
	b := newBundle(t, baseRules)
	const n = 15 // windows of 1, 2, 4 (full size), 4, 4
	var entries []map[string]any
	for i := range n {
		entries = append(entries, transient(fmt.Sprintf("e%02d", i), fmt.Sprintf("k%02d", i)))
	}
	is := &intentSignal{Bolt: b.store, key: "k07", written: make(chan struct{})}
	var inflight, most atomic.Int64
	overlapped := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		key := r.Header.Get("Idempotency-Key")
		if v, err := b.store.LedgerView(context.Background(), key); err != nil || v.State != string(idempotency.Dispatching) {
			t.Errorf("%s dispatched while its ledger says %q", key, v.State)
		}
		if key == "k06" { // the last of the first full window
			select {
			case <-is.written: // k07 (next window) is durably dispatching
				overlapped = true
			case <-time.After(10 * time.Second): // failsafe only
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	r := b.reconciler(2)
	r.Window, r.Store = 4, is
	r.Router = NewRulesRouter(b.engine.Rules, &Route{Name: "sink", Dispatcher: NewHTTPTarget(srv.URL, "", 30*time.Second, nil)})
	rep := b.run(r, b.jsonl("dlq.jsonl", entries...))
	if rep.Replays.Succeeded != n {
		t.Fatalf("replayed %d of %d: %+v", rep.Replays.Succeeded, n, rep.Replays)
	}
	if !overlapped {
		t.Error("the next window wrote no intent while the full window before it dispatched")
	}
	if m := most.Load(); m > 2 {
		t.Errorf("the target saw %d requests at once, want at most --max-parallel 2", m)
	}
	for i := range n {
		if v := b.ledger(fmt.Sprintf("k%02d", i)); v.State != string(idempotency.Succeeded) {
			t.Errorf("k%02d: ledger %s", i, v.State)
		}
	}
}

// Copies of a key in consecutive full-size windows: a window never starts
// with a key the window still in flight holds, and what was read ahead of
// that key is read again, so every copy after the first sees the first's
// outcome and is not sent again.
func TestWindowCopiesOfAKeyAcrossOverlappingWindowsAreSentOnce(t *testing.T) {
	b := newBundle(t, baseRules)
	var entries []map[string]any
	for i := range 40 { // e{i} and e{i+6} share a key: copies land in the window in flight or the next
		e := transient(fmt.Sprintf("e%02d", i), fmt.Sprintf("k%02d", i%6))
		e["payload"] = map[string]any{"to": fmt.Sprintf("k%02d@example.com", i%6)} // a copy: same payload
		entries = append(entries, e)
	}
	r := b.reconciler(2)
	r.Window = 4
	rep := b.run(r, b.jsonl("dlq.jsonl", entries...))
	if rep.Replays.Dispatched != 6 || rep.Replays.Succeeded != 6 {
		t.Fatalf("replays %+v, want the 6 keys sent once each", rep.Replays)
	}
	for k, c := range b.sink.perKey() {
		if c != 1 {
			t.Errorf("key %s delivered %d times", k, c)
		}
	}
	for i := 6; i < 40; i++ {
		if er := b.entry(fmt.Sprintf("jsonl:e%02d", i)); er.Status != store.StatusReplayed {
			t.Errorf("e%02d (a later copy of k%02d) is %s: %q", i, i%6, er.Status, er.Reason)
		}
	}
}

// resolveOnceReadAhead makes the sink, when it receives key, wait until vs
// has made its read ahead and then resolve ref as a person would (the
// 30 s wait is a failsafe only: the read comes first). The returned
// function says what went wrong, once the run is over.
func (b *testBundle) resolveOnceReadAhead(vs *viewSignal, key, ref string) func() error {
	var resolveErr error
	b.sink.status = func(k string, _ int) int {
		if k == key {
			select {
			case <-vs.read:
			case <-time.After(30 * time.Second):
				resolveErr = fmt.Errorf("%s was never read ahead", ref)
			}
			if _, err := Resolve(context.Background(), b.store, ref, "alice", "handled by hand"); err != nil && resolveErr == nil {
				resolveErr = err
			}
		}
		return http.StatusOK
	}
	return func() error { return resolveErr }
}
