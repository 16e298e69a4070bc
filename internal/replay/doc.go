// Package replay runs decisions: it plans (decides every entry of the
// sources without side effects) and reconciles (acts on the decisions
// through the idempotency ledger, dispatching replays, recording
// quarantines and approval requests).
//
// It is the only package with side effects on replay targets, and it keeps
// one order for every entry: ledger intent (fsynced, with its audit
// record), then dispatch, then outcome. It must never dispatch a key the
// ledger says succeeded, nor retry one whose outcome is unknown. It never
// sleeps for a retry: a retry is a due time on the entry (schedule.go), and
// a target's circuit breaker (breaker.go) decides whether anything is sent.
package replay
