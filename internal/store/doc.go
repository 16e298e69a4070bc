// Package store keeps replayctl's state: the idempotency ledger, the
// entries seen, approval requests, policy snapshots and the audit chain.
// Bolt, one bbolt file, is the embedded default for a single process.
//
// Everything one step of the replay runner writes (a ledger transition, the
// entry's status, the audit record describing it) commits in one
// transaction, fsynced before the step after it starts. The store never
// decides anything: the state machine lives in internal/idempotency, the
// chain hashing in internal/audit.
package store
