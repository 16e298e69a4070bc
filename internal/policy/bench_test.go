package policy

import (
	"context"
	"testing"

	"github.com/replayctl/replayctl/internal/triage"
)

// BenchmarkEvaluate is one evaluation of the bundled policy for a
// representative proposal (prepared once, evaluated many times).
func BenchmarkEvaluate(b *testing.B) {
	p, _ := bundled(b)
	eng := mustNew(b, 0, p...)
	in := input("tool.github.pr.create", map[string]string{"team": "growth", "risk": "low"}, triage.Transient, triage.AutoReplay)
	in.Rule, in.RuleMatched, in.Owner, in.ApproverGroup = "max_scheduling_retries", true, "platform-oncall", "platform-oncall"
	in.Ledger = triage.LedgerView{State: triage.StateDecided, Replays: 1}
	ctx := context.Background()
	if res, err := eng.Evaluate(ctx, in); err != nil || res.Action != triage.AutoReplay {
		b.Fatalf("%+v %v", res, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := eng.Evaluate(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}
