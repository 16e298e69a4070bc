package triage_test

import (
	"testing"

	"github.com/replayctl/replayctl/internal/group"
)

// BenchmarkGroupAssignment is what keeping an entry's failure group costs
// per entry write (its signature and id), on the entry BenchmarkDecide
// decides: issue 31 asks for at most 5% of the decision. Run both in one
// process to compare: go test -bench 'Decide$|GroupAssignment' -count 5.
func BenchmarkGroupAssignment(b *testing.B) {
	e := benchEntry()
	for b.Loop() {
		_ = group.IDOf(e, "transient")
	}
}
