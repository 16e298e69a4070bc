package policy

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/triage"
)

func TestBundledPoliciesCompile(t *testing.T) {
	p, tests := bundled(t)
	if len(p) != 1 || filepath.Base(p[0].Name) != "replayctl.rego" || len(tests) != 1 || filepath.Base(tests[0].Name) != "replayctl_test.rego" {
		t.Fatalf("bundled policies %+v tests %+v: ReadDir must split policies from their tests", p, tests)
	}
	mustNew(t, 0, p...)
	// The tests compile together with the policy too.
	mustNew(t, 0, append(p, tests...)...)
}

func TestBundledPolicyDecisions(t *testing.T) {
	p, _ := bundled(t)
	eng := mustNew(t, 0, p...)
	const (
		highRisk   = "entry is labelled risk: high: an automatic replay needs approval"
		payments   = "payments topics are never replayed automatically"
		governance = "governance failure: replay needs an explicit approval"
		unknown    = "commit state unknown: manual review"
	)
	high := map[string]string{"risk": "high"}
	probed := func(in *triage.PolicyInput, probe string) *triage.PolicyInput {
		in.Ledger.Probe = probe
		return in
	}
	cases := []struct {
		name    string
		in      *triage.PolicyInput
		want    triage.Action
		reasons []string
	}{
		{"transient, no labels", input("tool.email.send", nil, triage.Transient, triage.AutoReplay), triage.AutoReplay, nil},
		{"low risk stays auto_replay", input("tool.email.send", map[string]string{"risk": "low"}, triage.Transient, triage.AutoReplay), triage.AutoReplay, nil},
		{"high risk escalates", input("tool.email.send", high, triage.Transient, triage.AutoReplay), triage.RequireApproval, []string{highRisk}},
		{"high risk, any case", input("tool.email.send", map[string]string{"risk": "HIGH"}, triage.Transient, triage.AutoReplay), triage.RequireApproval, []string{highRisk}},
		{"high risk never lowers quarantine", input("tool.email.send", high, triage.Poison, triage.Quarantine), triage.Quarantine, nil},
		{"high risk never lowers manual_review", input("tool.email.send", high, triage.Transient, triage.ManualReview), triage.ManualReview, nil},
		{"payments topic", input("payments.charge.create", nil, triage.Transient, triage.AutoReplay), triage.RequireApproval, []string{payments}},
		{"payments topic, one segment below", input("payments.refund", nil, triage.Transient, triage.AutoReplay), triage.RequireApproval, []string{payments}},
		{"payments without a dot is not payments", input("payments", nil, triage.Transient, triage.AutoReplay), triage.AutoReplay, nil},
		{"paymentsx is not payments", input("paymentsx.charge", nil, triage.Transient, triage.AutoReplay), triage.AutoReplay, nil},
		{"payments further down is not payments", input("tool.payments.charge", nil, triage.Transient, triage.AutoReplay), triage.AutoReplay, nil},
		{"payments and high risk", input("payments.charge.create", high, triage.Transient, triage.AutoReplay), triage.RequireApproval, []string{highRisk, payments}},
		{"governance", input("tool.email.send", nil, triage.Governance, triage.AutoReplay), triage.RequireApproval, []string{governance}},
		{"governance proposed require_approval", input("tool.email.send", nil, triage.Governance, triage.RequireApproval), triage.RequireApproval, nil},
		{"unknown commit", input("tool.email.send", nil, triage.UnknownCommit, triage.AutoReplay), triage.ManualReview, []string{unknown}},
		{"unknown commit proposed require_approval", input("tool.email.send", nil, triage.UnknownCommit, triage.RequireApproval), triage.ManualReview, nil},
		{"poison stays quarantined", input("payments.charge", high, triage.Poison, triage.Quarantine), triage.Quarantine, nil},
		{"never laxer than require_approval", input("tool.email.send", nil, triage.Transient, triage.RequireApproval), triage.RequireApproval, nil},
		{"unknown commit probed not committed", probed(input("x.y", nil, triage.UnknownCommit, triage.RequireApproval), triage.ProbeNotCommitted),
			triage.RequireApproval, nil},
		{"unknown commit probed, never auto", probed(input("x.y", nil, triage.UnknownCommit, triage.AutoReplay), triage.ProbeNotCommitted),
			triage.RequireApproval, []string{unknown}},
		{"unknown commit probe inconclusive", probed(input("x.y", nil, triage.UnknownCommit, triage.RequireApproval), triage.ProbeInconclusive),
			triage.ManualReview, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := eng.Evaluate(context.Background(), c.in)
			if err != nil {
				t.Fatal(err)
			}
			if res.Action != c.want || !slices.Equal(res.Reasons, c.reasons) {
				t.Errorf("%s %q, want %s %q", res.Action, res.Reasons, c.want, c.reasons)
			}
			if triage.Stricter(res.Action, c.in.ProposedAction) != res.Action {
				t.Errorf("the policy answered %s, laxer than the proposal %s", res.Action, c.in.ProposedAction)
			}
		})
	}
}

// TestBundledRulesAndPolicyTogether decides through triage with what
// replayctl ships.
func TestBundledRulesAndPolicyTogether(t *testing.T) {
	g, snap, err := LoadEngine(context.Background(), "../../rules.yaml", bundledDir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.Policy == nil || g.Snapshot != snap.ID {
		t.Fatalf("engine policy %v snapshot %q, want the policy and %q", g.Policy, g.Snapshot, snap.ID)
	}
	mk := func(code, topic string, labels map[string]string) *entry.Entry {
		e := &entry.Entry{ID: "j-" + code, Source: "cordum", Topic: topic, ReasonCode: code, Attempts: 1, Labels: labels, Payload: []byte(`{"n":1}`)}
		e.EnsureKey()
		return e
	}
	cases := []struct {
		e            *entry.Entry
		action       triage.Action
		policyAction triage.Action
		reason       string
	}{
		{mk("timeout", "tool.github.pr.create", nil), triage.AutoReplay, triage.AutoReplay, "no rule matched"},
		{mk("timeout", "tool.github.pr.create", map[string]string{"risk": "high"}), triage.RequireApproval, triage.RequireApproval,
			"policy: entry is labelled risk: high"},
		{mk("timeout", "payments.card.charge", nil), triage.RequireApproval, triage.RequireApproval, "rule payments-need-approval matched"},
		{mk("max_scheduling_retries", "tool.x.y", nil), triage.AutoReplay, triage.AutoReplay, "matched: auto_replay"},
		{mk("schema_invalid", "payments.card.charge", nil), triage.Quarantine, triage.Quarantine, "matched: quarantine"},
		{mk("denied", "tool.x.y", nil), triage.RequireApproval, triage.RequireApproval, "matched: require_approval"},
		{mk("merge_conflict", "tool.x.y", nil), triage.ManualReview, triage.ManualReview, "no rule matched"},
		{mk("mystery", "tool.x.y", nil), triage.ManualReview, triage.ManualReview, "unrecognised"},
	}
	for _, c := range cases {
		d := g.Decide(context.Background(), c.e, triage.LedgerView{})
		if d.Action != c.action || d.PolicyAction != c.policyAction || d.PolicyError != "" {
			t.Errorf("%s on %s: action %s policy %s (error %q), want %s and %s", c.e.ReasonCode, c.e.Topic, d.Action, d.PolicyAction, d.PolicyError, c.action, c.policyAction)
		}
		found := false
		for _, r := range d.Reasons {
			found = found || strings.Contains(r, c.reason)
		}
		if !found {
			t.Errorf("%s: reasons %q do not mention %q", c.e.ReasonCode, d.Reasons, c.reason)
		}
		if d.PolicySnapshot != snap.ID {
			t.Errorf("%s: snapshot %q, want %q", c.e.ReasonCode, d.PolicySnapshot, snap.ID)
		}
	}
}

// TestPolicyInputDocument checks the input document field by field: the
// policy echoes input back as JSON.
func TestPolicyInputDocument(t *testing.T) {
	eng := mustNew(t, 0, regoFile("echo.rego", "decision := {\"action\": \"auto_replay\", \"reasons\": [json.marshal(input)]}\n"))
	e := &entry.Entry{
		ID: "item-3", Source: "prodigy", Scope: "job-9", Topic: "tool.x.create", ReasonCode: "Timeout",
		Message: "took too long", Attempts: 4, IdempotencyKey: "k-1",
		Labels:  map[string]string{"risk": "high", "team": "a"},
		State:   entry.SourceState{Status: "pending", ManualReviewRequired: true, ReprocessIneligible: true, PolicySnapshot: "sha256:ab"},
		Payload: []byte(`{"secret":"not for the policy"}`),
	}
	in := &triage.PolicyInput{
		Entry: e, Class: triage.Transient, Unrecognised: true, Rule: "r1", RuleMatched: true,
		ProposedAction: triage.RequireApproval, Owner: "ops", ApproverGroup: "oncall", MaxReplays: 2,
		Ledger: triage.LedgerView{State: triage.StateOutcomeUnknown, Replays: 1, Approved: true, Probe: triage.ProbeInconclusive, PayloadHash: "sha256:p"},
	}
	res, err := eng.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if len(res.Reasons) != 1 || json.Unmarshal([]byte(res.Reasons[0]), &got) != nil {
		t.Fatalf("reasons %q", res.Reasons)
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(`{
		"entry": {
			"id": "item-3", "source": "prodigy", "topic": "tool.x.create", "reason_code": "Timeout",
			"message": "took too long", "attempts": 4, "idempotency_key": "k-1",
			"labels": {"risk": "high", "team": "a"},
			"source_state": {"status": "pending", "handled": false, "manual_review_required": true,
				"reprocess_eligible": false, "policy_snapshot": "sha256:ab"}
		},
		"class": "transient", "unrecognised": true, "rule": "r1", "rule_matched": true,
		"proposed_action": "require_approval", "owner": "ops", "approver_group": "oncall", "max_replays": 2,
		"ledger": {"state": "outcome_unknown", "replays": 1, "approved": true, "probe": "inconclusive"}
	}`), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("policy input\n got %s\nwant %s", g, w)
	}
	// An entry without labels still has a labels object to index into.
	res, err = eng.Evaluate(context.Background(), input("t", nil, triage.Transient, triage.AutoReplay))
	if err != nil || json.Unmarshal([]byte(res.Reasons[0]), &got) != nil {
		t.Fatal(err)
	}
	if labels, ok := got["entry"].(map[string]any)["labels"].(map[string]any); !ok || len(labels) != 0 {
		t.Errorf("labels of an unlabelled entry: %#v", got["entry"].(map[string]any)["labels"])
	}
}

func TestPolicyResultParsing(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		want    triage.Action
		reasons []string
	}{
		{"no reasons", `decision := {"action": "quarantine"}`, triage.Quarantine, nil},
		{"empty reasons", `decision := {"action": "manual_review", "reasons": []}`, triage.ManualReview, nil},
		{"a set of reasons comes back sorted", `decision := {"action": "auto_replay", "reasons": {"b", "c", "a"}}`, triage.AutoReplay, []string{"a", "b", "c"}},
		{"a list of reasons comes back sorted", `decision := {"action": "auto_replay", "reasons": ["z", "y"]}`, triage.AutoReplay, []string{"y", "z"}},
		{"action in another case", `decision := {"action": " Require_Approval "}`, triage.RequireApproval, nil},
		{"extra keys are ignored", `decision := {"action": "auto_replay", "note": 1}`, triage.AutoReplay, nil},
	}
	for _, c := range cases {
		eng := mustNew(t, 0, regoFile("p.rego", c.body+"\n"))
		res, err := eng.Evaluate(context.Background(), input("t", nil, triage.Transient, triage.AutoReplay))
		if err != nil || res.Action != c.want || !slices.Equal(res.Reasons, c.reasons) {
			t.Errorf("%s: %s %q %v, want %s %q", c.name, res.Action, res.Reasons, err, c.want, c.reasons)
		}
	}
}
