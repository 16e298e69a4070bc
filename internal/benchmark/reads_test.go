package benchmark

import (
	"strings"
	"testing"
)

// TestReadsRows checks the read rows of the quick run (quickRun): every row
// measured something. It asserts no time.
func TestReadsRows(t *testing.T) {
	rows := quickRows(t, "reads")
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
