package benchmark

import (
	"strings"
	"testing"
)

// TestPGReadRows checks the PostgreSQL read rows of the quick run (quickRun): every
// row measured something (or all of them are one skipped row, without
// PostgreSQL). It asserts no time.
func TestPGReadRows(t *testing.T) {
	rows := quickRows(t, "pgread")
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
