package benchmark

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/group"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// micro measures the per-entry cost of each stage (testing.Benchmark), to
// compare with the seed spec's 5 ms ceiling per failed item.
func micro(ctx context.Context, c *Config) ([]Row, error) {
	c.progress("per-entry costs")
	spec, err := c.corpus("micro.jsonl", gen.Options{N: c.size(1000, 100), Seed: 4})
	if err != nil {
		return nil, err
	}
	src, err := source.Parse(spec)
	if err != nil {
		return nil, err
	}
	var entries []entry.Entry
	for e, err := range src.Entries(ctx) {
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	eng, err := c.engine(ctx)
	if err != nil {
		return nil, err
	}
	rulesOnly := &triage.Engine{Rules: eng.Rules, Snapshot: eng.Snapshot}
	st, err := store.OpenBolt(filepath.Join(c.Dir, "micro.db"), store.Options{})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	keys := c.size(10_000, 1_000)
	// Setup, not measured: one transaction (10,000 fsyncs took most of
	// the smoke run).
	if err := st.Update(ctx, func(tx store.Tx) error {
		for i := range keys {
			if _, err := tx.Transition(idempotency.Transition{Key: fmt.Sprintf("k%06d", i), To: idempotency.Decided}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	perEntry := func(name string, fn func(i int)) Row {
		var ns float64
		if c.Quick { // a smoke run: a fixed loop, not a second per row
			t0 := time.Now()
			for i := range 50 {
				fn(i)
			}
			ns = float64(time.Since(t0).Nanoseconds()) / 50
		} else {
			res := testing.Benchmark(func(b *testing.B) {
				i := 0
				for b.Loop() {
					fn(i)
					i++
				}
			})
			ns = float64(res.NsPerOp())
		}
		return Row{Measure: "per entry: " + name, Figure: ns / 1000, Unit: "µs", Target: "<< 100 µs (ceiling 5 ms)"}
	}
	decodeOnce := func(int) {
		for range src.Entries(ctx) {
		}
	}
	rows := []Row{
		perEntry("decode (jsonl, 0.5-4 KB)", func(i int) { decodeOnce(i) }),
		perEntry("classify + rule match", func(i int) { rulesOnly.Decide(ctx, &entries[i%len(entries)], triage.LedgerView{}) }),
		perEntry("policy eval (Rego)", func(i int) {
			e := &entries[i%len(entries)]
			_, _ = eng.Policy.Evaluate(ctx, &triage.PolicyInput{Entry: e, Class: triage.Transient, ProposedAction: triage.AutoReplay})
		}),
		perEntry("full decision", func(i int) { eng.Decide(ctx, &entries[i%len(entries)], triage.LedgerView{}) }),
		perEntry("ledger check (bbolt read)", func(i int) { _, _ = st.LedgerView(ctx, fmt.Sprintf("k%06d", i%keys)) }),
	}
	rows[0].Figure /= float64(len(entries)) // one op decoded the whole file
	// Issue 31: keeping an entry's failure group (its signature and id,
	// computed on every entry write) against the decision it rides with.
	grp := perEntry("failure group assignment (signature + id)", func(i int) {
		e := &entries[i%len(entries)]
		_ = group.IDOf(e, string(triage.Transient))
	})
	if full := rows[3].Figure; full > 0 {
		grp.Baseline, grp.Ratio = full, grp.Figure/full
		grp.Target, grp.Note = "<= 0.05 of the full decision", "ratio to the full decision, same run"
	}
	rows = append(rows, grp)
	return rows, nil
}
