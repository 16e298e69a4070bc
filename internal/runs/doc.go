// Package runs owns run records: a bulk replay or a reconcile as a task
// with an id, an owner, progress counts (total, done, succeeded, failed,
// held, rate, ETA) and a cancel request, persisted in the state store so
// that another process (`replayctl runs list|show|cancel`, the API) can
// follow and stop it.
//
// It never dispatches anything and never decides: the runner reports each
// entry to a Tracker, and stops starting new dispatches when the Tracker's
// context is cancelled; dispatches already in flight record their outcome.
package runs
