package triage_test

import (
	"context"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/triage"
)

// benchEngine is the engine replayctl runs with by default: the bundled
// rules.yaml and the bundled Rego policy, compiled once.
func benchEngine(b *testing.B) *triage.Engine {
	b.Helper()
	g, _, err := policy.LoadEngine(context.Background(), "../../rules.yaml", "../../policies", 0)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func benchEntry() *entry.Entry {
	return &entry.Entry{
		ID: "job_74c2", Source: "cordum", Topic: "tool.github.pr.create",
		ReasonCode: "max_scheduling_retries", Message: "max scheduling retries exceeded (attempts=50)",
		Attempts: 50, IdempotencyKey: "run_2f91:step_3",
		Labels:  map[string]string{"team": "growth", "risk": "low"},
		State:   entry.SourceState{Status: "pending_review", PolicySnapshot: "sha256:ab91"},
		Payload: []byte(`{"repo":"acme/api","title":"Bump deps","head":"deps/bump","base":"main"}`),
	}
}

func BenchmarkDecide(b *testing.B) {
	g := benchEngine(b)
	ctx := context.Background()
	e := benchEntry()
	view := triage.LedgerView{State: triage.StateDecided, Replays: 1}
	if d := g.Decide(ctx, e, view); d.Action != triage.AutoReplay || d.PolicyError != "" {
		b.Fatalf("the benchmark entry decides %s (policy error %q), want a full auto_replay path", d.Action, d.PolicyError)
	}
	b.ReportAllocs()
	for b.Loop() {
		g.Decide(ctx, e, view)
	}
}
