// Package triage turns an entry into a decision: it classifies the failure
// (reason-code taxonomy first, message patterns as a fallback), matches the
// rules of rules.yaml, asks the policy to make the proposal stricter, and
// returns a Decision value.
//
// Deciding is pure: the same entry, rules, policy and ledger view give the
// same decision, which is what lets an audit record be re-evaluated later.
// This package must never touch the network, the ledger or the clock, and it
// must never let an unrecognised failure, a policy error or an undefined
// policy result end in an automatic replay.
package triage
