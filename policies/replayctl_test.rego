package replayctl_test

import data.replayctl

base := {
	"entry": {
		"id": "job_1", "source": "cordum", "topic": "tool.github.pr.create",
		"reason_code": "timeout", "message": "", "attempts": 3,
		"idempotency_key": "k1", "labels": {}, "source_state": {},
	},
	"class": "transient",
	"unrecognised": false,
	"rule": "default:transient",
	"rule_matched": false,
	"proposed_action": "auto_replay",
	"ledger": {"state": "", "replays": 0, "approved": false},
}

with_labels(labels) := object.union(base, {"entry": object.union(base.entry, {"labels": labels})})

test_transient_low_risk_stays_auto if {
	replayctl.decision.action == "auto_replay" with input as base
	count(replayctl.decision.reasons) == 0 with input as base
}

test_high_risk_escalates_to_approval if {
	d := replayctl.decision with input as with_labels({"risk": "high"})
	d.action == "require_approval"
	count(d.reasons) == 1
}

test_high_risk_label_is_case_insensitive if {
	replayctl.decision.action == "require_approval" with input as with_labels({"risk": "HIGH"})
}

test_never_laxer_than_proposal if {
	inp := object.union(with_labels({"risk": "high"}), {"proposed_action": "quarantine"})
	replayctl.decision.action == "quarantine" with input as inp
}

test_payments_need_approval if {
	inp := object.union(base, {"entry": object.union(base.entry, {"topic": "payments.charge.create"})})
	replayctl.decision.action == "require_approval" with input as inp
}

test_governance_needs_approval if {
	inp := object.union(base, {"class": "governance"})
	replayctl.decision.action == "require_approval" with input as inp
}

test_unknown_commit_is_manual if {
	inp := object.union(base, {"class": "unknown_commit", "proposed_action": "require_approval"})
	replayctl.decision.action == "manual_review" with input as inp
}

test_unknown_action_is_undefined if {
	not replayctl.decision with input as object.union(base, {"proposed_action": "explode"})
}

test_unknown_commit_probed_not_committed_needs_approval if {
	inp := object.union(base, {
		"class": "unknown_commit", "proposed_action": "require_approval",
		"ledger": {"state": "", "replays": 0, "approved": false, "probe": "not_committed"},
	})
	replayctl.decision.action == "require_approval" with input as inp
}

test_unknown_commit_never_auto_even_when_probed if {
	inp := object.union(base, {
		"class": "unknown_commit", "proposed_action": "auto_replay",
		"ledger": {"state": "", "replays": 0, "approved": false, "probe": "not_committed"},
	})
	replayctl.decision.action == "require_approval" with input as inp
}
