package benchmark

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/backtest"
	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// backtestRows compares `policy backtest` over n recorded decisions with
// plan's pipeline over the n entries they were made on (both in this
// process, every core): re-deciding history should cost about what
// deciding the DLQ does, though each record is decoded from the audit
// trail (entry, ledger view, decision) rather than a source line.
func backtestRows(ctx context.Context, c *Config) ([]Row, error) {
	n := c.size(100_000, 2_000)
	c.progress(fmt.Sprintf("backtest throughput: policy backtest vs plan, %d entries, all cores", n))
	spec, err := c.corpus("plan.jsonl", gen.Options{N: n, Seed: 1})
	if err != nil {
		return nil, err
	}
	eng, err := c.engine(ctx)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(c.Dir, fmt.Sprintf("backtest-%d.db", n))
	st, err := bolt.Open(path, store.Options{})
	if err != nil {
		return nil, err
	}
	open := true
	defer func() {
		if open {
			st.Close()
		}
	}()
	if err := recordHistory(ctx, st, eng, spec); err != nil {
		return nil, err
	}
	ours := func() (time.Duration, error) {
		t0 := time.Now()
		rep, err := backtest.Decisions(ctx, st, backtest.Options{Engine: eng})
		if err == nil && rep.Decisions != n {
			err = fmt.Errorf("backtest re-decided %d of %d decisions", rep.Decisions, n)
		}
		return time.Since(t0), err
	}
	plan, bt, err := paired(c.size(3, 1), func() (time.Duration, error) { return c.planInProcess(ctx, spec) }, ours)
	if err != nil {
		return nil, err
	}
	rows := []Row{{Measure: fmt.Sprintf("backtest throughput, %d recorded decisions, all cores (decisions/s)", n),
		Figure: rate(n, bt), Unit: "/s", Baseline: rate(n, plan), Ratio: plan.Seconds() / bt.Seconds(),
		Note: "of plan over the same entries", Target: ">= 0.8x"}}
	peak, err := heapPeak(func() error { _, err := ours(); return err })
	if err != nil {
		return nil, err
	}
	rows = append(rows, Row{Measure: fmt.Sprintf("peak Go heap, policy backtest over %d recorded decisions", n), Figure: peak, Unit: "MB",
		Note: "HeapAlloc sampled every 5 ms, in process", Target: "flat"})
	if c.Self == "" {
		return rows, nil
	}
	// The command in its own process, for its peak memory: it streams, so
	// the figure should not grow with the history.
	open = false
	if err := st.Close(); err != nil {
		return nil, err
	}
	_, mb, err := c.child(ctx, "policy", "backtest", "--db", path, "--rules", c.Rules, "--policies", c.Policies, "-o", "json")
	if err != nil {
		return nil, err
	}
	return append(rows, Row{Measure: fmt.Sprintf("peak RSS, policy backtest over %d recorded decisions", n), Figure: mb, Unit: "MB",
		Note: "VmHWM, which counts the pages of the bbolt file mapped while it is read: it grows with the file, the heap does not"}), nil
}

// heapPeak runs fn and returns the highest HeapAlloc seen meanwhile, in MB,
// after two collections (the second empties sync.Pool's victim cache).
func heapPeak(fn func() error) (float64, error) {
	runtime.GC()
	runtime.GC()
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	err := fn()
	close(done)
	<-sampled
	return float64(peak.Load()) / (1 << 20), err
}

// recordHistory records a decision for every entry of spec, as a
// reconcile does (the entry without its payload, the decision with its
// view), 1,000 to a transaction.
func recordHistory(ctx context.Context, st *bolt.Bolt, eng *triage.Engine, spec string) error {
	if seq, _, err := st.AuditHead(ctx); err != nil || seq > 0 {
		return err // recorded by an earlier step of this run
	}
	src, err := source.Parse(spec)
	if err != nil {
		return err
	}
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var batch []audit.Record
	flush := func() error {
		err := st.Update(ctx, func(tx store.Tx) error {
			for i := range batch {
				if _, err := tx.Append(&batch[i]); err != nil {
					return err
				}
			}
			return nil
		})
		batch = batch[:0]
		return err
	}
	for e, err := range source.All([]source.Source{src})(ctx) {
		if err != nil {
			return err
		}
		d := eng.Decide(ctx, &e, triage.LedgerView{At: at})
		in := e
		in.Payload = nil
		batch = append(batch, audit.Record{Time: at, Actor: "bench", Kind: audit.KindDecision, EntryRef: e.Ref(),
			Decision: &d, Input: &in, Action: d.Action, PolicySnapshot: d.PolicySnapshot})
		if len(batch) == 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
