package benchmark

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/connector/registry"
	"github.com/replayctl/replayctl/internal/gen"
)

// memory plans 100k and 1M entries of a JSONL file, and 100k and 1M
// Prodigy item files, each in a process of its own, and reads that
// process's own peak RSS (`bench peak`): streaming means it must not grow
// with the count. The Prodigy rows also compare the rate at 1M items with
// the rate at 100k: the walk must be linear.
func memory(ctx context.Context, c *Config) ([]Row, error) {
	if c.Self == "" {
		return nil, nil
	}
	small, large := c.size(100_000, 2_000), c.size(1_000_000, 20_000)
	plan := func(spec string) (time.Duration, float64, error) {
		return c.child(ctx, "plan", "--source", spec, "--rules", c.Rules, "--policies", c.Policies,
			"--db", filepath.Join(c.Dir, "none.db"), "-o", "json")
	}
	var rows []Row
	var first float64
	for i, n := range []int{small, large} {
		c.progress(fmt.Sprintf("memory: planning %d jsonl entries", n))
		spec, err := c.corpus(fmt.Sprintf("mem-%d.jsonl", n), gen.Options{N: n, Seed: 3})
		if err != nil {
			return nil, err
		}
		_, rss, err := plan(spec)
		_ = os.Remove(strings.TrimPrefix(spec, "jsonl:"))
		if err != nil {
			return nil, err
		}
		row := Row{Measure: fmt.Sprintf("peak RSS, plan %d jsonl entries", n), Figure: rss, Unit: "MB",
			Note: "the plan process's own VmHWM", Target: "flat"}
		if i == 0 {
			first = rss
		} else {
			row.Baseline, row.Ratio, row.Note = first, rss/first, "of the smaller run (own VmHWM)"
			row.Target = "flat: about 1x"
		}
		rows = append(rows, row)
	}

	// The system whose DLQ is a directory of item files, one per entry.
	var items gen.Format
	for _, f := range registry.GenFormats() {
		if f.ItemsDir != "" {
			items = f
		}
	}
	var firstRate float64
	for i, n := range []int{small, large} {
		c.progress(fmt.Sprintf("memory: writing and planning %d %s", n, items.Items))
		dir := filepath.Join(c.Dir, fmt.Sprintf("%s-%d", items.Kind, n))
		spec, err := gen.Write(items, dir, gen.Options{N: n, Seed: 6, MinPayload: 64, MaxPayload: 256})
		if err != nil {
			return nil, err
		}
		took, rss, err := plan(spec)
		_ = os.RemoveAll(dir)
		if err != nil {
			return nil, err
		}
		rows = append(rows, Row{Measure: fmt.Sprintf("peak RSS, plan %d %s", n, items.Items), Figure: rss, Unit: "MB",
			Note: "the plan process's own VmHWM", Target: "< 64 MB"})
		r := Row{Measure: fmt.Sprintf("plan %d %s (items/s)", n, items.Items), Figure: rate(n, took), Unit: "/s"}
		if i == 0 {
			firstRate = r.Figure
		} else {
			r.Baseline, r.Ratio, r.Note = firstRate, r.Figure/firstRate, "of the rate at a tenth of the items (one run each)"
			r.Target = "linear: about 1x"
		}
		rows = append(rows, r)
	}
	return rows, nil
}
