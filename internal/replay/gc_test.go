package replay

import (
	"runtime/debug"
	"testing"
)

// A reconcile run raises GOGC only when the user has not set it, and puts
// the previous setting back.
func TestTuneGCLeavesAUserGOGCAlone(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	restore := TuneGC(func(k string) string {
		if k == "GOGC" {
			return "150"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC=150 in the environment: the run set the collector to %d, want it left alone", got)
	}
	restore()

	restore = TuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(ReconcileGCPercent); got != ReconcileGCPercent {
		t.Fatalf("no GOGC: collector at %d, want %d", got, ReconcileGCPercent)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("after the run: collector at %d, want the previous 100", got)
	}
}
