# replayctl's bundled replay policy.
#
# Contract: define data.replayctl.decision as {"action": A, "reasons": [...]}
# for every input. replayctl keeps the stricter of the proposed action and A
# (auto_replay < require_approval < manual_review < quarantine), so a policy
# can only make a decision stricter. An error, a timeout or an undefined
# decision fails closed: the entry goes to manual_review.
#
# input: see README "Extending rules and policies" (entry, class,
# unrecognised, rule, proposed_action, owner, approver_group, max_replays,
# ledger).
package replayctl

rank := {"auto_replay": 0, "require_approval": 1, "manual_review": 2, "quarantine": 3}

decision := {"action": action, "reasons": reasons}

# The proposal itself is always wanted; the rules below may add stricter ones.
wanted contains input.proposed_action

# High-risk work never replays without a person.
wanted contains "require_approval" if high_risk

reasons contains "entry is labelled risk: high: an automatic replay needs approval" if {
	high_risk
	input.proposed_action == "auto_replay"
}

# Money moves only with a person in the loop.
wanted contains "require_approval" if payments

reasons contains "payments topics are never replayed automatically" if {
	payments
	input.proposed_action == "auto_replay"
}

# Governance failures are re-evaluated against the latest policy and need
# an explicit approval, whatever a rule proposed.
wanted contains "require_approval" if input.class == "governance"

reasons contains "governance failure: replay needs an explicit approval" if {
	input.class == "governance"
	input.proposed_action == "auto_replay"
}

# Unknown commit state: never an automatic replay. A person investigates,
# unless a compensating read (input.ledger.probe) found the key not
# committed: then a person only needs to approve the replay.
wanted contains "require_approval" if input.class == "unknown_commit"

wanted contains "manual_review" if {
	input.class == "unknown_commit"
	not input.ledger.probe == "not_committed"
}

reasons contains "commit state unknown: manual review" if {
	input.class == "unknown_commit"
	input.proposed_action == "auto_replay"
}

high_risk if lower(input.entry.labels.risk) == "high"

payments if startswith(input.entry.topic, "payments.")

# The strictest wanted action. Undefined (so failing closed) if an action
# is not in rank.
action := a if {
	some a in wanted
	every b in wanted {
		rank[b] <= rank[a]
	}
}
