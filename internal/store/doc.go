// Package store is the contract replayctl's state backends keep: the
// idempotency ledger, the entries seen, approval requests, policy
// snapshots and the audit chain, behind Backend and Tx (what a backend
// lacks answers ErrNotImplemented; Features says which it is). It holds
// what both backends share (record and payload codecs, hashed and index
// keys, lineages, groups, prune's steps) and never imports a backend:
// internal/store/bolt (one bbolt file, the embedded default for a single
// process) and internal/store/postgres (shared by many workers) do.
//
// Everything one step of the replay runner writes (a ledger transition, the
// entry's status, the audit record describing it) commits in one
// transaction, fsynced before the step after it starts. The store never
// decides anything: the state machine lives in internal/idempotency, the
// chain hashing in internal/audit.
package store
