package benchmark

import (
	"context"
	"strings"
	"testing"
)

// TestPGReadRows runs the PostgreSQL read rows at their quick sizes: every
// row measured something (or all of them are one skipped row, without
// PostgreSQL). It asserts no time.
func TestPGReadRows(t *testing.T) {
	rows, err := Run(context.Background(), Config{Quick: true, Only: "pgread", Dir: t.TempDir(), Rules: "../../rules.yaml", Policies: "../../policies"})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	Print(&b, rows)
	t.Log("\n" + b.String())
	if len(rows) == 1 && strings.HasPrefix(rows[0].Note, "skipped") {
		t.Skip(rows[0].Note)
	}
	if len(rows) != 12 {
		t.Fatalf("%d rows, want 6 reads at 2 sizes", len(rows))
	}
	for _, r := range rows {
		if r.Figure <= 0 || r.Ratio <= 0 || !strings.Contains(r.Measure, "on PostgreSQL") {
			t.Errorf("row measured nothing: %+v", r)
		}
	}
}
