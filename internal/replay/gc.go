package replay

import "runtime/debug"

// ReconcileGCPercent is the collector's GOGC during a reconcile run when the
// user has set none. A run's live heap is small (a few MB: two windows of
// entries, pooled buffers) and it allocates ~70 KB per replayed entry, so
// at Go's default (100) the collector ran every few dozen entries, its
// fixed cost per cycle a tenth of reconcile's CPU (issue 16; measured in
// the README's Benchmarks: 400 takes 15-35% off the CPU per entry for
// ~16 MB more peak RSS). The heap goal still follows the live heap, so a
// run holding large payloads grows in proportion, as it would at 100.
const ReconcileGCPercent = 400

// TuneGC sets GOGC to ReconcileGCPercent for a reconcile run unless the
// environment sets GOGC (getenv is os.Getenv; GOGC=100 keeps Go's
// default, GOGC=off turns the collector off, as usual). It returns what
// puts the previous setting back. GOMEMLIMIT, when set, still caps the
// heap as Go documents.
func TuneGC(getenv func(string) string) (restore func()) {
	if getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(ReconcileGCPercent)
	return func() { debug.SetGCPercent(old) }
}
