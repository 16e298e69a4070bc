// Package bolt is the bbolt backend of store.Backend: one file, held by
// one process (another gets an *InUseError naming its pid), opened with
// Open. Concurrent Updates share one transaction and one fsync (batch.go);
// indexes and counters are written in the same transaction as what they
// describe (bolt_index.go, bolt_views.go). It never decides anything and
// never shares work: the Shared methods answer store.ErrNotImplemented.
package bolt
