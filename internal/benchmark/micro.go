package benchmark

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/group"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
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
	// A fresh ledger each run: a rerun with --dir found the keys decided
	// and stopped ("state changed concurrently").
	dbPath := filepath.Join(c.Dir, "micro.db")
	if err := os.Remove(dbPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	st, err := bolt.Open(dbPath, store.Options{})
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
	// Single runs on the shared machine spread from 1.7% to 18%: the row
	// is the median of alternating (decision, assignment) pairs, each
	// pair's ratio taken in the same breath, with the pairs' spread.
	assign := func(i int) {
		e := &entries[i%len(entries)]
		_ = group.IDOf(e, string(triage.Transient))
	}
	decide := func(i int) { eng.Decide(ctx, &entries[i%len(entries)], triage.LedgerView{}) }
	grp := groupCostRow(c.size(11, 3), func(fn func(int)) float64 { return perEntry("", fn).Figure }, decide, assign)
	rows = append(rows, grp)
	return rows, nil
}

// groupCostRow times the full decision and the group assignment
// alternately, pairs times each, and reports the assignment's cost per
// entry and its median ratio to the decision, with the pairs' spread.
func groupCostRow(pairs int, perEntryUS func(func(int)) float64, decide, assign func(int)) Row {
	var ratios, assigns, decisions []float64
	for i := range pairs {
		var d, a float64
		if i%2 == 0 { // which goes first alternates too
			d, a = perEntryUS(decide), perEntryUS(assign)
		} else {
			a, d = perEntryUS(assign), perEntryUS(decide)
		}
		decisions, assigns = append(decisions, d), append(assigns, a)
		if d > 0 {
			ratios = append(ratios, a/d)
		}
	}
	row := Row{Measure: "per entry: failure group assignment (signature + id)", Figure: median(assigns), Unit: "µs",
		Baseline: median(decisions), Ratio: median(ratios), Target: "<= 0.05 of the full decision"}
	if len(ratios) > 0 {
		s := append([]float64(nil), ratios...)
		sort.Float64s(s)
		row.Note = fmt.Sprintf("median ratio to the full decision, %.1f%%, over %d alternating pairs (spread %.1f%%-%.1f%%, middle half %.1f%%-%.1f%%)",
			100*median(s), len(s), 100*s[0], 100*s[len(s)-1], 100*s[len(s)/4], 100*s[(3*len(s)-1)/4])
	}
	return row
}
