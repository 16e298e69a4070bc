package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/replayctl/replayctl/internal/triage"
)

// inputValue builds the policy input directly as an AST value: converting
// a Go map through reflection is a large part of an evaluation's cost.
//
//	input = {
//	  "entry": {"id", "source", "topic", "reason_code", "message", "attempts",
//	            "idempotency_key", "labels", "source_state"},
//	  "class", "unrecognised", "rule", "rule_matched", "proposed_action",
//	  "owner", "approver_group", "max_replays",
//	  "ledger": {"state", "replays", "approved", "probe"}
//	}
func inputValue(in *triage.PolicyInput) ast.Value {
	e := in.Entry
	labels := ast.NewObject()
	for k, v := range e.Labels {
		labels.Insert(ast.StringTerm(k), ast.StringTerm(v))
	}
	state := ast.NewObject(
		item("status", ast.StringTerm(e.State.Status)),
		item("handled", ast.BooleanTerm(e.State.Handled)),
		item("manual_review_required", ast.BooleanTerm(e.State.ManualReviewRequired)),
		item("reprocess_eligible", ast.BooleanTerm(!e.State.ReprocessIneligible)),
		item("policy_snapshot", ast.StringTerm(e.State.PolicySnapshot)),
	)
	ent := ast.NewObject(
		item("id", ast.StringTerm(e.ID)),
		item("source", ast.StringTerm(e.Source)),
		item("topic", ast.StringTerm(e.Topic)),
		item("reason_code", ast.StringTerm(e.ReasonCode)),
		item("message", ast.StringTerm(e.Message)),
		item("attempts", ast.IntNumberTerm(e.Attempts)),
		item("idempotency_key", ast.StringTerm(e.IdempotencyKey)),
		item("labels", ast.NewTerm(labels)),
		item("source_state", ast.NewTerm(state)),
	)
	ledger := ast.NewObject(
		item("state", ast.StringTerm(in.Ledger.State)),
		item("replays", ast.IntNumberTerm(in.Ledger.Replays)),
		item("approved", ast.BooleanTerm(in.Ledger.Approved)),
		item("probe", ast.StringTerm(in.Ledger.Probe)),
	)
	return ast.NewObject(
		item("entry", ast.NewTerm(ent)),
		item("class", ast.StringTerm(string(in.Class))),
		item("unrecognised", ast.BooleanTerm(in.Unrecognised)),
		item("rule", ast.StringTerm(in.Rule)),
		item("rule_matched", ast.BooleanTerm(in.RuleMatched)),
		item("proposed_action", ast.StringTerm(string(in.ProposedAction))),
		item("owner", ast.StringTerm(in.Owner)),
		item("approver_group", ast.StringTerm(in.ApproverGroup)),
		item("max_replays", ast.IntNumberTerm(in.MaxReplays)),
		item("ledger", ast.NewTerm(ledger)),
	)
}

func item(k string, v *ast.Term) [2]*ast.Term { return ast.Item(ast.StringTerm(k), v) }
