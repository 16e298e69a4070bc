package postgres

import "testing"

// Statements are counted under their text as sent and reported under
// the text with its white space folded and lowered: two spellings of one
// statement are one name, and COMMIT is counted however it is spelt.
func TestTraceFoldsStatementsWhenReported(t *testing.T) {
	tr := newPGTrace()
	for _, sql := range []string{"SELECT rec\n\t FROM ledger WHERE key = $1", "select rec FROM ledger   WHERE key = $1", "commit", " COMMIT\n", "rollback"} {
		tr.count(sql)
	}
	got := tr.snapshot()
	if got.Statements != 5 || got.Commits != 2 {
		t.Errorf("%d statements, %d commits, want 5 and 2", got.Statements, got.Commits)
	}
	want := map[string]int64{"select rec from ledger where key = $1": 2, "commit": 2, "rollback": 1}
	if len(got.ByStatement) != len(want) {
		t.Errorf("by statement %v, want %v", got.ByStatement, want)
	}
	for k, n := range want {
		if got.ByStatement[k] != n {
			t.Errorf("%q counted %d times, want %d (%v)", k, got.ByStatement[k], n, got.ByStatement)
		}
	}
}
