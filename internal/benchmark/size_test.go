package benchmark

import (
	"context"
	"strings"
	"testing"
)

// TestSizeRowAndBreakdown checks the store size row of the quick run (quickRun) and
// breaks the store down: every record kind of a reconcile with replays is
// found and decoded (compressed records included), and the payloads sit in
// the compressed bucket. It asserts no time and no size: sizes are
// reported, the target is the table's.
func TestSizeRowAndBreakdown(t *testing.T) {
	c := &Config{Quick: true, Dir: t.TempDir(), Rules: "../../rules.yaml", Policies: "../../policies"}
	rows := quickRows(t, "size")
	if len(rows) != 1 || rows[0].Figure <= 0 || rows[0].Baseline <= 0 || rows[0].Ratio <= 0 || rows[0].Target != "<= 2x" {
		t.Fatalf("rows %+v", rows)
	}
	_, db, err := sizeRun(context.Background(), c, 50, false)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Breakdown(&b, db); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	for _, want := range []string{"| payloads_z | 50 |", "| audit | ", "| decision | 50 |", "| dispatch | ", "| outcome | "} {
		if !strings.Contains(out, want) {
			t.Errorf("breakdown lacks %q", want)
		}
	}
}
