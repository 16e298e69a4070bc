package triage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
)

func TestUndecodableEntryIsQuarantined(t *testing.T) {
	// Even rules that would replay poison, a policy that says auto_replay,
	// and a ledger that says committed do not change it: nothing of the
	// record can be trusted.
	p := policyReturning(AutoReplay)
	g := newEngine(t, "version: v1\ndlq_rules:\n  - action: auto_replay\n", p)
	undecodable := func(e *entry.Entry) {
		e.DecodeError = "invalid character '}' looking for beginning of value"
		e.ReasonCode, e.Message = "timeout", ""
	}
	for _, view := range []LedgerView{{}, {State: StateSucceeded}, {Approved: true}} {
		for _, handled := range []bool{false, true} {
			e := newEntry("", "", undecodable, func(e *entry.Entry) { e.State.Handled = handled })
			d := decide(g, e, view)
			if d.Class != Poison || d.ReasonCode != "parse_error" || d.Rule != "undecodable" ||
				d.ProposedAction != Quarantine || d.Action != Quarantine {
				t.Errorf("view %+v handled %v: class %s code %s rule %s proposed %s action %s, want poison parse_error undecodable quarantine",
					view, handled, d.Class, d.ReasonCode, d.Rule, d.ProposedAction, d.Action)
			}
			if !hasReason(d, "record could not be decoded: invalid character '}' looking for beginning of value") {
				t.Errorf("reasons %q do not carry the decode error", d.Reasons)
			}
			if d.EvidenceHash == "" || d.PolicySnapshot != testSnapshot {
				t.Errorf("evidence %q snapshot %q", d.EvidenceHash, d.PolicySnapshot)
			}
		}
	}
	if p.calls() != 0 {
		t.Errorf("the policy was asked %d times about undecodable records", p.calls())
	}
}

func TestSourceStateAndLedgerView(t *testing.T) {
	g := newEngine(t, `version: v1
defaults: {max_replays: 2}
dlq_rules:
  - match: {reason_code: denied}
    action: require_approval
`, nil)
	ph := entry.PayloadHash(newEntry("timeout", "").Payload)
	cases := []struct {
		name string
		code string
		mod  func(*entry.Entry)
		view LedgerView
		want Action
		why  string
	}{
		{"nothing known", "timeout", nil, LedgerView{}, AutoReplay, "no rule matched"},
		{"handled at the source", "timeout", func(e *entry.Entry) { e.State = entry.SourceState{Status: "RESOLVED", Handled: true} }, LedgerView{},
			Skip, "already handled at the source (RESOLVED)"},
		{"handled, even if poison", "schema_invalid", func(e *entry.Entry) { e.State.Handled = true }, LedgerView{}, Skip, "already handled"},
		{"handled, even if unrecognised", "mystery", func(e *entry.Entry) { e.State.Handled = true }, LedgerView{}, Skip, "already handled"},
		{"ledger succeeded", "timeout", nil, LedgerView{State: StateSucceeded, PayloadHash: ph}, Skip, AlreadyCommitted},
		{"ledger succeeded, no payload hash recorded", "timeout", nil, LedgerView{State: StateSucceeded}, Skip, AlreadyCommitted},
		{"ledger succeeded, poison entry", "schema_invalid", nil, LedgerView{State: StateSucceeded, PayloadHash: ph}, Skip, AlreadyCommitted},
		{"probe found it committed", "timeout", nil, LedgerView{Probe: ProbeCommitted}, Skip, AlreadyCommitted + " (compensating read"},
		{"payload-hash conflict", "timeout", nil, LedgerView{State: StateDecided, PayloadHash: "sha256:other"}, Quarantine, "idempotency key conflict"},
		{"payload-hash conflict outranks committed", "timeout", nil, LedgerView{State: StateSucceeded, PayloadHash: "sha256:other"}, Quarantine, "idempotency key conflict"},
		{"outcome unknown", "timeout", nil, LedgerView{State: StateOutcomeUnknown, PayloadHash: ph}, ManualReview, "outcome is unknown: never retried blindly"},
		{"dispatching", "timeout", nil, LedgerView{State: StateDispatching, PayloadHash: ph}, ManualReview, "outcome is unknown"},
		{"outcome unknown, probe inconclusive", "timeout", nil, LedgerView{State: StateOutcomeUnknown, Probe: ProbeInconclusive}, ManualReview, "outcome is unknown"},
		{"outcome unknown, probe not committed", "timeout", nil, LedgerView{State: StateOutcomeUnknown, Probe: ProbeNotCommitted}, RequireApproval, "outcome is unknown"},
		{"outcome unknown, poison stays quarantined", "schema_invalid", nil, LedgerView{State: StateOutcomeUnknown}, Quarantine, "outcome is unknown"},
		{"failed", "timeout", nil, LedgerView{State: StateFailed, PayloadHash: ph}, Quarantine, "failed definitively"},
		{"decided before", "timeout", nil, LedgerView{State: StateDecided, PayloadHash: ph}, AutoReplay, "no rule matched"},
		{"replays below max", "timeout", nil, LedgerView{State: StateDecided, Replays: 1}, AutoReplay, "no rule matched"},
		{"replays at max", "timeout", nil, LedgerView{State: StateDecided, Replays: 2}, ManualReview, "max_replays reached (2 of 2)"},
		{"replays past max", "timeout", nil, LedgerView{State: StateDecided, Replays: 5}, ManualReview, "max_replays reached (5 of 2)"},
		{"replays at max, not auto_replay", "denied", nil, LedgerView{State: StateDecided, Replays: 9}, RequireApproval, "rule rules.yaml:4 matched"},
		{"manual review required", "timeout", func(e *entry.Entry) { e.State.ManualReviewRequired = true }, LedgerView{}, ManualReview, "source requires manual review"},
		{"manual review required, poison", "schema_invalid", func(e *entry.Entry) { e.State.ManualReviewRequired = true }, LedgerView{}, Quarantine, "source requires manual review"},
		{"reprocess ineligible", "timeout", func(e *entry.Entry) { e.State.ReprocessIneligible = true }, LedgerView{}, RequireApproval, "not eligible for automatic reprocessing"},
		{"reprocess ineligible, poison", "schema_invalid", func(e *entry.Entry) { e.State.ReprocessIneligible = true }, LedgerView{}, Quarantine, "no rule matched"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mods []func(*entry.Entry)
			if c.mod != nil {
				mods = append(mods, c.mod)
			}
			d := decide(g, newEntry(c.code, "", mods...), c.view)
			if d.Action != c.want {
				t.Errorf("action %s, want %s; reasons %q", d.Action, c.want, d.Reasons)
			}
			if !hasReason(d, c.why) {
				t.Errorf("reasons %q do not mention %q", d.Reasons, c.why)
			}
			if d.Ledger != c.view {
				t.Errorf("decision records ledger view %+v, want %+v", d.Ledger, c.view)
			}
		})
	}
}

func TestAlreadyCommittedIsItsOwnReason(t *testing.T) {
	g := newEngine(t, "version: v1\n", nil)
	d := decide(g, newEntry("timeout", ""), LedgerView{State: StateSucceeded})
	if d.Action != Skip || d.Reasons[len(d.Reasons)-1] != "already committed" {
		t.Fatalf("action %s reasons %q, want skip ending with %q", d.Action, d.Reasons, "already committed")
	}
}

func TestSkippedEntriesAreNotSentToThePolicy(t *testing.T) {
	p := policyReturning(Quarantine)
	g := newEngine(t, "version: v1\n", p)
	handled := newEntry("timeout", "", func(e *entry.Entry) { e.State.Handled = true })
	for _, d := range []Decision{
		decide(g, handled, LedgerView{}),
		decide(g, newEntry("timeout", ""), LedgerView{State: StateSucceeded}),
		decide(g, newEntry("timeout", ""), LedgerView{Probe: ProbeCommitted}),
	} {
		if d.Action != Skip || d.PolicyAction != "" {
			t.Errorf("action %s policy action %q, want skip without asking the policy", d.Action, d.PolicyAction)
		}
	}
	if p.calls() != 0 {
		t.Errorf("policy asked %d times about entries with nothing left to do", p.calls())
	}
}

func TestReprocessIneligibleIsNeverAutoReplayed(t *testing.T) {
	lax := "version: v1\ndlq_rules:\n  - action: auto_replay\n"
	engines := map[string]*Engine{
		"class defaults":          newEngine(t, "version: v1\n", nil),
		"auto_replay rule":        newEngine(t, lax, nil),
		"auto_replay rule+policy": newEngine(t, lax, policyReturning(AutoReplay)),
	}
	codes := []string{"timeout", "schema_invalid", "denied", "merge_conflict", "mystery"}
	views := []LedgerView{{}, {State: StateDecided, Replays: 1}, {Probe: ProbeNotCommitted}}
	for name, g := range engines {
		for _, code := range codes {
			for _, view := range views {
				e := newEntry(code, "", func(e *entry.Entry) { e.State.ReprocessIneligible = true })
				if d := decide(g, e, view); d.Action == AutoReplay {
					t.Errorf("%s: %s with %+v: auto_replay of an entry its source marks ineligible", name, code, view)
				}
			}
		}
	}
}

func TestPolicyErrorFailsClosed(t *testing.T) {
	boom := errors.New("policy result undefined")
	for _, code := range []string{"timeout", "denied", "merge_conflict"} {
		p := policyFailing(boom)
		d := decide(newEngine(t, "version: v1\n", p), newEntry(code, ""), LedgerView{})
		if d.Action != ManualReview || d.PolicyError != boom.Error() || d.PolicyAction != "" {
			t.Errorf("%s: action %s policy error %q policy action %q, want manual_review with the error", code, d.Action, d.PolicyError, d.PolicyAction)
		}
		if !hasReason(d, "policy failed, failing closed: policy result undefined") {
			t.Errorf("%s: reasons %q do not say the policy failed", code, d.Reasons)
		}
		if p.calls() != 1 {
			t.Errorf("%s: policy asked %d times", code, p.calls())
		}
	}
	// Already stricter than manual_review: the action stays, the error is kept.
	d := decide(newEngine(t, "version: v1\n", policyFailing(boom)), newEntry("schema_invalid", ""), LedgerView{})
	if d.Action != Quarantine || d.PolicyError == "" {
		t.Errorf("poison with a failing policy: %s policy error %q", d.Action, d.PolicyError)
	}
	// An approval does not lift a decision the policy could not make.
	d = decide(newEngine(t, "version: v1\n", policyFailing(boom)), newEntry("denied", ""), LedgerView{Approved: true})
	if d.Action != ManualReview {
		t.Errorf("approved entry with a failing policy: %s, want manual_review", d.Action)
	}
}

// TestPolicyOnlyMakesStricter runs every proposal against every policy
// answer: the outcome is always the stricter of the two.
func TestPolicyOnlyMakesStricter(t *testing.T) {
	for _, proposed := range RuleActions {
		for _, answer := range RuleActions {
			name := fmt.Sprintf("%s then %s", proposed, answer)
			p := policyReturning(answer, "because")
			g := newEngine(t, "version: v1\ndlq_rules:\n  - name: all\n    action: "+string(proposed)+"\n", p)
			d := decide(g, newEntry("timeout", ""), LedgerView{})
			want := Stricter(proposed, answer)
			if d.Action != want || d.ProposedAction != proposed || d.PolicyAction != answer || d.PolicyError != "" {
				t.Errorf("%s: proposed %s policy %s action %s, want action %s", name, d.ProposedAction, d.PolicyAction, d.Action, want)
			}
			if got := hasReason(d, "policy made the action stricter: "+string(answer)); got != (want != proposed) {
				t.Errorf("%s: reasons %q: stricter-reason present %v, want %v", name, d.Reasons, got, want != proposed)
			}
			if !hasReason(d, "policy: because") {
				t.Errorf("%s: the policy's reasons are not kept: %q", name, d.Reasons)
			}
		}
	}
}

func TestPolicyInvalidActionFailsClosed(t *testing.T) {
	for _, a := range []Action{"", "bogus", Skip} {
		d := decide(newEngine(t, "version: v1\n", policyReturning(a)), newEntry("timeout", ""), LedgerView{})
		if d.Action != ManualReview || d.PolicyError == "" {
			t.Errorf("policy answer %q: action %q policy error %q, want manual_review with a policy error", a, d.Action, d.PolicyError)
		}
	}
}

func TestPolicySeesTheProposal(t *testing.T) {
	p := policyReturning(AutoReplay)
	g := newEngine(t, `version: v1
defaults: {owner: ops, approver_group: oncall, max_replays: 4}
dlq_rules:
  - name: pay
    match: {topic: "payments.**"}
    action: require_approval
    approver_group: payments
`, p)
	view := LedgerView{State: StateDecided, Replays: 1, Probe: ProbeInconclusive}
	e := newEntry("timeout", "", topic("payments.charge"))
	decide(g, e, view)
	decide(g, newEntry("mystery", ""), LedgerView{})
	if p.calls() != 2 {
		t.Fatalf("policy asked %d times, want 2", p.calls())
	}
	got := p.seen[0]
	want := PolicyInput{Entry: e, Class: Transient, Rule: "pay", RuleMatched: true, ProposedAction: RequireApproval,
		Owner: "ops", ApproverGroup: "payments", MaxReplays: 4, Ledger: view}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("policy input\n got %+v\nwant %+v", got, want)
	}
	// For an unrecognised entry the policy sees the escalated action, and
	// that no rule matched.
	un := p.seen[1]
	if !un.Unrecognised || un.Class != UnknownCommit || un.RuleMatched || un.Rule != "default:unknown_commit" || un.ProposedAction != ManualReview {
		t.Errorf("unrecognised entry's policy input: %+v", un)
	}
}

func TestApprovalLiftsRequireApprovalOnly(t *testing.T) {
	g := newEngine(t, "version: v1\n", nil)
	cases := []struct {
		code string
		mod  func(*entry.Entry)
		view LedgerView
		want Action
	}{
		{"denied", nil, LedgerView{Approved: true}, AutoReplay},
		{"denied", nil, LedgerView{}, RequireApproval},
		{"timeout", func(e *entry.Entry) { e.State.ReprocessIneligible = true }, LedgerView{Approved: true}, AutoReplay},
		{"merge_conflict", nil, LedgerView{Approved: true}, ManualReview},
		{"merge_conflict", nil, LedgerView{Approved: true, Probe: ProbeNotCommitted}, AutoReplay},
		{"schema_invalid", nil, LedgerView{Approved: true}, Quarantine},
		{"denied", nil, LedgerView{Approved: true, State: StateSucceeded}, Skip},
		{"denied", nil, LedgerView{Approved: true, State: StateFailed}, Quarantine},
	}
	for _, c := range cases {
		var mods []func(*entry.Entry)
		if c.mod != nil {
			mods = append(mods, c.mod)
		}
		d := decide(g, newEntry(c.code, "", mods...), c.view)
		if d.Action != c.want {
			t.Errorf("%s with %+v: %s, want %s (reasons %q)", c.code, c.view, d.Action, c.want, d.Reasons)
		}
		if c.want == AutoReplay && !hasReason(d, "approved by a person for this evidence") {
			t.Errorf("%s: reasons %q do not record the approval", c.code, d.Reasons)
		}
	}
	// A policy that asks for more than approval still wins.
	strict := newEngine(t, "version: v1\n", policyReturning(ManualReview))
	if d := decide(strict, newEntry("denied", ""), LedgerView{Approved: true}); d.Action != ManualReview {
		t.Errorf("approval bypassed a stricter policy: %s", d.Action)
	}
}

func TestCompensatingRead(t *testing.T) {
	g := newEngine(t, "version: v1\n", nil)
	cases := []struct {
		code      string
		view      LedgerView
		want      Action
		why       string
		needProbe bool
	}{
		{"merge_conflict", LedgerView{}, ManualReview, "no rule matched", true},
		{"mystery", LedgerView{}, ManualReview, "unrecognised failure", true},
		{"timeout", LedgerView{State: StateOutcomeUnknown}, ManualReview, "outcome is unknown", true},
		{"timeout", LedgerView{State: StateDispatching}, ManualReview, "outcome is unknown", true},
		{"merge_conflict", LedgerView{Probe: ProbeNotCommitted}, RequireApproval, "compensating read: not committed", false},
		{"mystery", LedgerView{Probe: ProbeNotCommitted}, RequireApproval, "unrecognised failure", false},
		{"merge_conflict", LedgerView{Probe: ProbeInconclusive}, ManualReview, "no rule matched", false},
		{"merge_conflict", LedgerView{Probe: ProbeCommitted}, Skip, AlreadyCommitted, false},
		{"timeout", LedgerView{}, AutoReplay, "no rule matched", false},
		{"schema_invalid", LedgerView{State: StateOutcomeUnknown}, Quarantine, "outcome is unknown", false},
	}
	for _, c := range cases {
		d := decide(g, newEntry(c.code, ""), c.view)
		if d.Action != c.want || !hasReason(d, c.why) {
			t.Errorf("%s with %+v: %s %q, want %s mentioning %q", c.code, c.view, d.Action, d.Reasons, c.want, c.why)
		}
		if d.NeedsProbe() != c.needProbe {
			t.Errorf("%s with %+v: NeedsProbe %v, want %v", c.code, c.view, d.NeedsProbe(), c.needProbe)
		}
	}
}

func TestDecisionCarriesTheEntry(t *testing.T) {
	e := newEntry(" Timeout ", "boom", func(e *entry.Entry) {
		e.Source, e.Origin, e.Scope, e.ID = "prodigy", "dlq.json:7", "job-9", "item-3"
		e.IdempotencyKey = "run_2f91:step_3"
	})
	d := decide(newEngine(t, "version: v1\n", nil), e, LedgerView{})
	want := Decision{EntryID: "item-3", EntryRef: "prodigy:job-9/item-3", Source: "prodigy", Origin: "dlq.json:7",
		Topic: "tool.github.pr.create", IdempotencyKey: "run_2f91:step_3", PayloadHash: entry.PayloadHash(e.Payload), ReasonCode: "timeout"}
	got := Decision{EntryID: d.EntryID, EntryRef: d.EntryRef, Source: d.Source, Origin: d.Origin, Topic: d.Topic,
		IdempotencyKey: d.IdempotencyKey, PayloadHash: d.PayloadHash, ReasonCode: d.ReasonCode}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decision identity\n got %+v\nwant %+v", got, want)
	}
}

var evidenceRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func TestSnapshotAndEvidenceHash(t *testing.T) {
	rules := "version: v1\ndlq_rules:\n  - name: denied-rule\n    match: {reason_code: denied}\n    action: require_approval\n"
	g := newEngine(t, rules, nil)
	base := decide(g, newEntry("denied", ""), LedgerView{})
	if base.PolicySnapshot != testSnapshot || !evidenceRe.MatchString(base.EvidenceHash) {
		t.Fatalf("snapshot %q evidence %q", base.PolicySnapshot, base.EvidenceHash)
	}
	otherSnapshot := *g
	otherSnapshot.Snapshot = "sha256:other"
	otherRule := newEngine(t, "version: v1\n", nil) // same class and action, the default rule

	changed := map[string]Decision{
		"class":           decide(g, newEntry("timeout", ""), LedgerView{}),
		"reason code":     decide(g, newEntry("approval_required", ""), LedgerView{}),
		"rule":            decide(otherRule, newEntry("denied", ""), LedgerView{}),
		"snapshot":        decide(&otherSnapshot, newEntry("denied", ""), LedgerView{}),
		"payload":         decide(g, newEntry("denied", "", func(e *entry.Entry) { e.Payload = []byte(`{"a":2}`) }), LedgerView{}),
		"topic":           decide(g, newEntry("denied", "", topic("tool.jira.create")), LedgerView{}),
		"labels":          decide(g, newEntry("denied", "", labels("risk", "high")), LedgerView{}),
		"label value":     decide(g, newEntry("denied", "", labels("risk", "low")), LedgerView{}),
		"idempotency key": decide(g, newEntry("denied", "", func(e *entry.Entry) { e.IdempotencyKey = "k2" }), LedgerView{}),
		"entry":           decide(g, newEntry("denied", "", func(e *entry.Entry) { e.ID = "job_2" }), LedgerView{}),
		// Since issue 16 the payload is hashed as the bytes a replay
		// forwards: re-formatted bytes are a different payload at the target.
		"payload formatting": decide(g, newEntry("denied", "", func(e *entry.Entry) { e.Payload = []byte("{\n  \"a\": 1\n}") }), LedgerView{}),
	}
	if otherRule.Rules == nil || changed["rule"].Class != base.Class || changed["rule"].ProposedAction != base.ProposedAction {
		t.Fatal("the rule case must differ in its rule only")
	}
	for what, d := range changed {
		if d.EvidenceHash == base.EvidenceHash {
			t.Errorf("evidence hash ignores the %s", what)
		}
	}
	unchanged := map[string]Decision{
		"a second run":         decide(g, newEntry("denied", ""), LedgerView{}),
		"more attempts":        decide(g, newEntry("denied", "", attempts(9)), LedgerView{}),
		"another message":      decide(g, newEntry("denied", "other words"), LedgerView{}),
		"reason code case":     decide(g, newEntry("DENIED", ""), LedgerView{}),
		"a ledger view":        decide(g, newEntry("denied", ""), LedgerView{State: StateDecided, Replays: 1}),
		"the wall clock":       decide(g, newEntry("denied", "", func(e *entry.Entry) { e.LastFailure = time.Unix(1e9, 0) }), LedgerView{}),
		"an empty label map":   decide(g, newEntry("denied", "", labels()), LedgerView{}),
		"the payload supplied": g.DecideWithPayloadHash(context.Background(), newEntry("denied", ""), LedgerView{}, entry.PayloadHash([]byte(`{"a":1}`))),
	}
	for what, d := range unchanged {
		if d.EvidenceHash != base.EvidenceHash {
			t.Errorf("evidence hash changes with %s", what)
		}
	}
	// Labels are hashed in a stable order whatever the map's.
	many := func() Decision {
		return decide(g, newEntry("denied", "", labels("a", "1", "b", "2", "c", "3", "d", "4", "e", "5", "f", "6")), LedgerView{})
	}
	first := many().EvidenceHash
	for range 20 {
		if many().EvidenceHash != first {
			t.Fatal("evidence hash depends on label map order")
		}
	}
}

func TestEvidenceHashSeparatesLabelKeysFromValues(t *testing.T) {
	g := newEngine(t, "version: v1\n", nil)
	a := decide(g, newEntry("denied", "", labels("a=b", "c")), LedgerView{})
	b := decide(g, newEntry("denied", "", labels("a", "b=c")), LedgerView{})
	if a.EvidenceHash == b.EvidenceHash {
		t.Fatal("different labels give the same evidence hash")
	}
}

func TestDecideIsDeterministic(t *testing.T) {
	entries := []*entry.Entry{
		newEntry("timeout", ""),
		newEntry(" DENIED ", "x", labels("risk", "high", "team", "a", "z", "9")),
		newEntry("", "connection refused"),
		newEntry("mystery", "nothing known"),
		newEntry("merge_conflict", ""),
		newEntry("schema_invalid", "", func(e *entry.Entry) { e.State.ManualReviewRequired = true }),
		newEntry("timeout", "", func(e *entry.Entry) { e.DecodeError = "bad" }),
		newEntry("timeout", "", topic("payments.card.charge")),
	}
	views := []LedgerView{{}, {State: StateOutcomeUnknown}, {State: StateDecided, Replays: 3}, {Probe: ProbeNotCommitted}, {Approved: true}}
	policy := func() Policy {
		return &fakePolicy{evaluate: func(in *PolicyInput) (PolicyResult, error) {
			if in.Entry.Labels["risk"] == "high" {
				return PolicyResult{Action: RequireApproval, Reasons: []string{"high risk"}}, nil
			}
			return PolicyResult{Action: in.ProposedAction}, nil
		}}
	}
	rules := `version: v1
defaults: {owner: ops, backoff: {initial: 2s}}
patterns:
  - {regex: "nothing", class: governance}
dlq_rules:
  - name: pay
    match: {topic: "payments.**", class: [transient]}
    action: require_approval
`
	// Two engines built independently from the same text decide alike.
	g1, g2 := newEngine(t, rules, policy()), newEngine(t, rules, policy())
	for _, e := range entries {
		for _, v := range views {
			a, b := decide(g1, e, v), decide(g2, e, v)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("entry %s %q view %+v: two decisions differ:\n%+v\n%+v", e.ID, e.ReasonCode, v, a, b)
			}
			if again := decide(g1, e, v); !reflect.DeepEqual(a, again) {
				t.Errorf("entry %q view %+v: deciding again differs", e.ReasonCode, v)
			}
		}
	}
}

func TestDecideConcurrently(t *testing.T) {
	g := newEngine(t, cordumSeed, policyReturning(RequireApproval))
	codes := []string{"max_scheduling_retries", "schema_invalid", "denied", "unknown_commit_state", "mystery"}
	want := make([]Decision, len(codes))
	for i, c := range codes {
		want[i] = decide(g, newEntry(c, ""), LedgerView{})
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				k := (w + i) % len(codes)
				if d := decide(g, newEntry(codes[k], ""), LedgerView{}); !reflect.DeepEqual(d, want[k]) {
					t.Errorf("goroutine %d: %s decided differently", w, codes[k])
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestDecisionJSONRoundTrip(t *testing.T) {
	g := newEngine(t, "version: v1\ndefaults:\n  backoff: {strategy: constant, initial: 1500ms, max: 2m, multiplier: 1.5}\n", policyReturning(RequireApproval, "r"))
	d := decide(g, newEntry("timeout", "", labels("risk", "high")), LedgerView{State: StateDecided, Replays: 1})
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"backoff":{"strategy":"constant","initial":"1.5s","max":"2m0s","multiplier":1.5}`) {
		t.Errorf("backoff is not written as duration strings: %s", b)
	}
	var back Decision
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Errorf("round trip changed the decision:\n got %+v\nwant %+v", back, d)
	}
	var bad Backoff
	if err := json.Unmarshal([]byte(`{"initial":"soon"}`), &bad); err == nil {
		t.Error("a bad duration was accepted")
	}
}

// A ledger written before issue 16 stored the hash of the compacted payload.
// Re-reading the same pretty-printed payload must not become an idempotency
// key conflict, and the decision must carry the stored hash so the next
// ledger transition (which refuses a different hash) and approvals bound to
// the old evidence still match.
func TestLegacyStoredPayloadHashIsNotAConflict(t *testing.T) {
	g := newEngine(t, "version: v1\n", nil)
	e := newEntry("timeout", "", func(e *entry.Entry) {
		e.Payload = json.RawMessage("{\n  \"repo\": \"acme/api\",\n  \"n\": 1\n}")
	})
	legacy := entry.LegacyPayloadHash(e.Payload)
	if legacy == entry.PayloadHash(e.Payload) {
		t.Fatal("fixture: the payload must hash differently in the two schemes")
	}
	for _, state := range []string{StateDecided, StateSucceeded} {
		d := decide(g, e, LedgerView{State: state, PayloadHash: legacy})
		if hasReason(d, "idempotency key conflict") || d.Action == Quarantine {
			t.Errorf("%s with a legacy hash of the same payload: %s %q", state, d.Action, d.Reasons)
		}
		if d.PayloadHash != legacy {
			t.Errorf("%s: decision hash %s, want the stored %s", state, d.PayloadHash, legacy)
		}
	}
	// A genuinely different payload under the key is still a conflict.
	other := newEntry("timeout", "", func(e *entry.Entry) { e.Payload = json.RawMessage(`{"repo":"acme/other"}`) })
	if d := decide(g, other, LedgerView{State: StateDecided, PayloadHash: legacy}); d.Action != Quarantine ||
		!hasReason(d, "idempotency key conflict") {
		t.Errorf("a different payload under a legacy hash: %s %q, want quarantine for the conflict", d.Action, d.Reasons)
	}
}
