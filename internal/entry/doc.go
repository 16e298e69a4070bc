// Package entry holds the one model every dead-lettered record is normalised
// to, whatever DLQ it came from (each system's connector, internal/connector,
// fills entries in from its own records).
//
// It owns the shape of an entry and the derivation of stable identities
// (idempotency keys, payload hashes). It must never do I/O or make decisions:
// sources fill entries in, triage reads them.
package entry
