// Package approval runs the approval workflow for replays that need a
// person: who may decide (members of the rule's approver group), the
// four-eyes rule (nobody approves what they raised), one decision per
// request, expiry, and the binding of an approval to the evidence it was
// given on (a changed entry, class, rule or policy makes it stale).
//
// It records every decision in the audit chain in the same transaction as
// the decision itself. It never replays anything: an approved request is
// acted on by the replay runner, which still goes through the ledger and
// the current policy.
package approval
