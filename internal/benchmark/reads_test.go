package benchmark

import (
	"context"
	"strings"
	"testing"
)

// TestReadsRows runs the read rows at their quick sizes: every row
// measured something. It asserts no time.
func TestReadsRows(t *testing.T) {
	t.Parallel() // with TestHarnessSmoke: each waits on its own fsyncs
	rows, err := Run(context.Background(), Config{Quick: true, Only: "reads", Dir: t.TempDir(), Rules: "../../rules.yaml", Policies: "../../policies"})
	if err != nil {
		t.Fatal(err)
	}
	// The two RSS rows measure the replayctl binary (Config.Self), which
	// only `make bench` passes: without it they are left out.
	if len(rows) != 12 {
		t.Fatalf("%d rows, want 6 reads at 2 sizes", len(rows))
	}
	var b strings.Builder
	Print(&b, rows)
	t.Log("\n" + b.String())
	for _, r := range rows {
		if strings.HasPrefix(r.Note, "skipped") {
			continue
		}
		if r.Figure <= 0 || r.Ratio <= 0 {
			t.Errorf("row measured nothing: %+v", r)
		}
	}
}
