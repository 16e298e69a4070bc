package benchmark

import (
	"context"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/triage"
)

// decisions compares `plan`'s whole pipeline with its irreducible cost:
// decoding the same entries and evaluating the same prepared Rego query.
func decisions(ctx context.Context, c *Config) ([]Row, error) {
	n := c.size(100_000, 2_000)
	c.progress("decision throughput: plan vs decode + policy eval")
	spec, err := c.corpus("plan.jsonl", gen.Options{N: n, Seed: 1})
	if err != nil {
		return nil, err
	}
	src, err := source.Parse(spec)
	if err != nil {
		return nil, err
	}
	eng, err := c.engine(ctx)
	if err != nil {
		return nil, err
	}
	baseline, err := best(2, func() (time.Duration, error) {
		t0 := time.Now()
		for e, err := range src.Entries(ctx) {
			if err != nil {
				return 0, err
			}
			in := &triage.PolicyInput{Entry: &e, Class: triage.Transient, Rule: "default:transient",
				ProposedAction: triage.AutoReplay, MaxReplays: 3}
			_, _ = eng.Policy.Evaluate(ctx, in)
		}
		return time.Since(t0), nil
	})
	if err != nil {
		return nil, err
	}
	planner := &replay.Planner{Engine: eng}
	pipeline, err := best(2, func() (time.Duration, error) {
		t0 := time.Now()
		err := planner.Plan(ctx, []source.Source{src}, func(*entry.Entry, *triage.Decision) error { return nil })
		return time.Since(t0), err
	})
	if err != nil {
		return nil, err
	}
	return []Row{{Measure: "decision throughput (plan, entries/s)", Figure: rate(n, pipeline), Unit: "/s",
		Baseline: rate(n, baseline), Ratio: pipeline.Seconds() / baseline.Seconds(), Note: "of baseline time", Target: "<= 1.5x"}}, nil
}
