package benchmark

import (
	"context"
	"fmt"
	"os"

	"github.com/replayctl/replayctl/internal/gen"
)

// memory plans 100k and 1M entries from one file in a child process and
// reads its peak RSS: streaming means it must not grow with the count.
func memory(ctx context.Context, c *Config) ([]Row, error) {
	if c.Self == "" {
		return nil, nil
	}
	var rows []Row
	var first float64
	for i, n := range []int{c.size(100_000, 2_000), c.size(1_000_000, 20_000)} {
		c.progress(fmt.Sprintf("memory: planning %d entries", n))
		spec, err := c.corpus(fmt.Sprintf("mem-%d.jsonl", n), gen.Options{N: n, Seed: 3})
		if err != nil {
			return nil, err
		}
		rss, err := c.maxRSS(ctx, "plan", "--source", spec, "--rules", c.Rules, "--policies", c.Policies,
			"--db", c.Dir+"/none.db", "-o", "json")
		if err != nil {
			return nil, err
		}
		_ = os.Remove(spec[len("jsonl:"):])
		row := Row{Measure: fmt.Sprintf("peak RSS planning %d entries", n), Figure: rss, Unit: "MB", Target: "< 256 MB"}
		if i == 0 {
			first = rss
		} else {
			row.Baseline, row.Ratio, row.Note = first, rss/first, "of the smaller run"
			row.Target = "< 256 MB, no growth"
		}
		rows = append(rows, row)
	}
	return rows, nil
}
