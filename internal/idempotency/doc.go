// Package idempotency defines the replay ledger: per idempotency key, a
// state machine whose every transition is a compare-and-set made durable
// before the next step, so that a key is dispatched at most once unless its
// outcome is known to be a retryable failure.
//
//	(none) -> decided -> dispatching -> succeeded
//	                               \-> failed            (definite: never retried automatically)
//	                               \-> outcome_unknown   (may have happened: probe or person)
//	                               \-> decided           (retryable: certainly not committed)
//
// It owns the states, the allowed transitions and the Ledger contract that
// every backend (bbolt in internal/store, PostgreSQL later) implements. It
// must never let succeeded move anywhere, nor outcome_unknown go back to
// dispatching without passing a probe or a person.
package idempotency
