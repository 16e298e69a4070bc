package benchmark

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/backtest"
	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
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
	st, err := store.OpenBolt(path, store.Options{})
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
		Note: "the backtest process's own VmHWM", Target: "flat"}), nil
}

// recordHistory records a decision for every entry of spec, as a
// reconcile does (the entry without its payload, the decision with its
// view), 1,000 to a transaction.
func recordHistory(ctx context.Context, st *store.Bolt, eng *triage.Engine, spec string) error {
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
