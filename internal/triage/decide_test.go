package triage

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
)

// funcPolicy is a hand-written Policy for decision tests.
type funcPolicy func(in *PolicyInput) (PolicyResult, error)

func (f funcPolicy) Evaluate(_ context.Context, in *PolicyInput) (PolicyResult, error) { return f(in) }

var _ Policy = funcPolicy(nil)

func engine(t *testing.T, rules string, p Policy) *Engine {
	t.Helper()
	r, err := ParseRules("rules.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	return &Engine{Rules: r, Policy: p, Snapshot: "sha256:snap"}
}

func ent(code, msg string) *entry.Entry {
	e := &entry.Entry{ID: "j1", Source: entry.KindCordum, Topic: "tool.github.pr.create", ReasonCode: code, Message: msg, Attempts: 3, Payload: []byte(`{"a":1}`)}
	e.EnsureKey()
	return e
}

func TestTaxonomyEveryCode(t *testing.T) {
	g := engine(t, "version: v1\n", nil)
	for code, class := range builtinTaxonomy() {
		for _, variant := range []string{code, strings.ToUpper(code), " " + code + " "} {
			d := g.Decide(context.Background(), ent(variant, ""), LedgerView{})
			if d.Class != class || d.Unrecognised {
				t.Errorf("%q: class %s, want %s", variant, d.Class, class)
			}
		}
	}
}

func TestMessageFallbackAndUnrecognised(t *testing.T) {
	g := engine(t, "version: v1\npatterns:\n  - {contains: econnreset, class: transient}\n  - {regex: 'quota \\d+ exceeded', class: governance}\n", nil)
	cases := []struct {
		code, msg string
		class     Class
		unrec     bool
	}{
		{"", "Request TIMED OUT after 30s", Transient, false},
		{"", "context deadline exceeded", Transient, false},
		{"weird", "dial tcp: connection refused", Transient, false},
		{"", "Service Unavailable", Transient, false},
		{"", "Permission denied: /etc", Governance, false},
		{"", "403 Forbidden", Governance, false},
		{"", "access denied for user", Governance, false},
		{"", "Invalid JSON at byte 3", Poison, false},
		{"", "parse error near line 1", Poison, false},
		{"", "schema mismatch", Poison, false},
		{"", "read: ECONNRESET", Transient, false},
		{"", "quota 42 exceeded", Governance, false},
		{"schema_invalid", "timed out", Poison, false}, // the code wins
		{"weird_new_code", "something odd", UnknownCommit, true},
		{"", "", UnknownCommit, true},
	}
	for _, c := range cases {
		d := g.Decide(context.Background(), ent(c.code, c.msg), LedgerView{})
		if d.Class != c.class || d.Unrecognised != c.unrec {
			t.Errorf("%q/%q: class %s unrecognised %v, want %s %v", c.code, c.msg, d.Class, d.Unrecognised, c.class, c.unrec)
		}
		if d.Unrecognised && d.Action == AutoReplay {
			t.Errorf("%q/%q: an unrecognised failure would be auto-replayed", c.code, c.msg)
		}
	}
}

func TestUnrecognisedNeverAutoReplayedEvenWhenARuleSaysSo(t *testing.T) {
	g := engine(t, "version: v1\ndlq_rules:\n  - match: {class: unknown_commit}\n    action: auto_replay\n", nil)
	d := g.Decide(context.Background(), ent("mystery", "huh"), LedgerView{})
	if d.Action != ManualReview {
		t.Fatalf("action %s", d.Action)
	}
}

func TestRuleMatching(t *testing.T) {
	rules := `version: v1
dlq_rules:
  - name: by-label
    match: {labels: {team: payments}}
    action: quarantine
  - name: by-list
    match: {reason_code: [rate_limited, NO_WORKERS]}
    action: require_approval
  - name: by-topic
    match: {topic: "tool.*.create", min_attempts: 2, max_attempts: 5}
    action: manual_review
  - name: deep
    match: {topic: "payments.**", source: nexora}
    action: require_approval
`
	g := engine(t, rules, nil)
	cases := []struct {
		mod  func(*entry.Entry)
		rule string
	}{
		{func(e *entry.Entry) { e.Labels = map[string]string{"team": "payments"} }, "by-label"},
		{func(e *entry.Entry) { e.ReasonCode = "no_workers" }, "by-list"},
		{func(e *entry.Entry) { e.Topic = "tool.jira.create" }, "by-topic"},
		{func(e *entry.Entry) { e.Topic, e.Attempts = "tool.jira.create", 9 }, "default:transient"},
		{func(e *entry.Entry) { e.Topic = "tool.github.pr.create" }, "default:transient"}, // * stops at dots
		{func(e *entry.Entry) { e.Topic, e.Source = "payments.card.charge", entry.KindNexora }, "deep"},
		{func(e *entry.Entry) { e.Topic = "payments.card.charge" }, "default:transient"},
	}
	for i, c := range cases {
		e := ent("timeout", "")
		c.mod(e)
		if d := g.Decide(context.Background(), e, LedgerView{}); d.Rule != c.rule {
			t.Errorf("case %d: rule %s, want %s", i, d.Rule, c.rule)
		}
	}
}

func TestClassDefaults(t *testing.T) {
	g := engine(t, "version: v1\n", nil)
	want := map[string]Action{"timeout": AutoReplay, "schema_invalid": Quarantine, "denied": RequireApproval, "merge_conflict": ManualReview}
	for code, a := range want {
		if d := g.Decide(context.Background(), ent(code, ""), LedgerView{}); d.Action != a || d.Rule != "default:"+string(d.Class) {
			t.Errorf("%s: %s by %s, want %s", code, d.Action, d.Rule, a)
		}
	}
}

func TestSourceStateAndLedger(t *testing.T) {
	g := engine(t, "version: v1\ndefaults: {max_replays: 2}\n", nil)
	ctx := context.Background()
	e := ent("timeout", "")
	ph := entry.PayloadHash(e.Payload)
	cases := []struct {
		name string
		mod  func(*entry.Entry)
		view LedgerView
		want Action
		why  string
	}{
		{"undecodable", func(e *entry.Entry) { e.DecodeError = "unexpected EOF" }, LedgerView{}, Quarantine, "could not be decoded"},
		{"handled", func(e *entry.Entry) { e.State = entry.SourceState{Status: "RESOLVED", Handled: true} }, LedgerView{}, Skip, "already handled"},
		{"committed", nil, LedgerView{State: StateSucceeded, PayloadHash: ph}, Skip, AlreadyCommitted},
		{"conflict", nil, LedgerView{State: StateSucceeded, PayloadHash: "sha256:other"}, Quarantine, "conflict"},
		{"unknown", nil, LedgerView{State: StateOutcomeUnknown, PayloadHash: ph}, ManualReview, "unknown"},
		{"dispatching", nil, LedgerView{State: StateDispatching, PayloadHash: ph}, ManualReview, "unknown"},
		{"failed", nil, LedgerView{State: StateFailed, PayloadHash: ph}, Quarantine, "failed definitively"},
		{"max_replays", nil, LedgerView{State: StateDecided, Replays: 2, PayloadHash: ph}, ManualReview, "max_replays reached"},
		{"manual required", func(e *entry.Entry) { e.State.ManualReviewRequired = true }, LedgerView{}, ManualReview, "requires manual review"},
		{"not eligible", func(e *entry.Entry) { e.State.ReprocessIneligible = true }, LedgerView{}, RequireApproval, "not eligible"},
		{"committed by probe", nil, LedgerView{Probe: ProbeCommitted}, Skip, AlreadyCommitted},
	}
	for _, c := range cases {
		e := ent("timeout", "")
		if c.mod != nil {
			c.mod(e)
		}
		d := g.Decide(ctx, e, c.view)
		if d.Action != c.want || !strings.Contains(strings.Join(d.Reasons, "|"), c.why) {
			t.Errorf("%s: %s %v, want %s mentioning %q", c.name, d.Action, d.Reasons, c.want, c.why)
		}
	}
	if d := g.Decide(ctx, func() *entry.Entry { e := ent("", ""); e.DecodeError = "x"; return e }(), LedgerView{}); d.Class != Poison || d.ReasonCode != "parse_error" {
		t.Fatalf("undecodable: %+v", d)
	}
}

func TestPolicyCanOnlyMakeStricterAndFailsClosed(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		p      funcPolicy
		want   Action
		failed bool
	}{
		{"laxer ignored", func(*PolicyInput) (PolicyResult, error) { return PolicyResult{Action: AutoReplay}, nil }, Quarantine, false},
		{"stricter wins", func(*PolicyInput) (PolicyResult, error) {
			return PolicyResult{Action: ManualReview, Reasons: []string{"r"}}, nil
		}, Quarantine, false},
		{"error fails closed", func(*PolicyInput) (PolicyResult, error) { return PolicyResult{}, errors.New("boom") }, Quarantine, true},
	}
	for _, c := range cases {
		g := engine(t, "version: v1\n", c.p)
		d := g.Decide(ctx, ent("schema_invalid", ""), LedgerView{})
		if d.Action != c.want || (d.PolicyError != "") != c.failed {
			t.Errorf("%s (poison): %s policy error %q", c.name, d.Action, d.PolicyError)
		}
	}
	// On a transient entry proposed auto_replay:
	strict := engine(t, "version: v1\n", funcPolicy(func(*PolicyInput) (PolicyResult, error) { return PolicyResult{Action: RequireApproval}, nil }))
	if d := strict.Decide(ctx, ent("timeout", ""), LedgerView{}); d.Action != RequireApproval || d.PolicyAction != RequireApproval {
		t.Fatalf("stricter policy: %s", d.Action)
	}
	broken := engine(t, "version: v1\n", funcPolicy(func(*PolicyInput) (PolicyResult, error) { return PolicyResult{}, errors.New("undefined") }))
	if d := broken.Decide(ctx, ent("timeout", ""), LedgerView{}); d.Action != ManualReview || d.PolicyError == "" {
		t.Fatalf("failing policy on auto_replay: %s", d.Action)
	}
	// An approval lifts require_approval only; a policy asking for more wins.
	more := engine(t, "version: v1\n", funcPolicy(func(*PolicyInput) (PolicyResult, error) { return PolicyResult{Action: ManualReview}, nil }))
	if d := more.Decide(ctx, ent("denied", ""), LedgerView{Approved: true}); d.Action != ManualReview {
		t.Fatalf("approval bypassed a stricter policy: %s", d.Action)
	}
	if d := engine(t, "version: v1\n", nil).Decide(ctx, ent("denied", ""), LedgerView{Approved: true}); d.Action != AutoReplay {
		t.Fatalf("approved governance entry: %s", d.Action)
	}
}

func TestDefaultsAndOverrides(t *testing.T) {
	g := engine(t, `version: v1
defaults: {max_replays: 7, owner: ops, approver_group: oncall, backoff: {initial: 2s}}
dlq_rules:
  - match: {reason_code: timeout}
    action: auto_replay
    max_replays: 1
    owner: mail-team
    backoff: {strategy: constant, initial: 5s}
`, nil)
	d := g.Decide(context.Background(), ent("timeout", ""), LedgerView{})
	if d.MaxReplays != 1 || d.Owner != "mail-team" || d.ApproverGroup != "oncall" || d.Backoff.Strategy != BackoffConstant || d.Backoff.Initial.Seconds() != 5 {
		t.Fatalf("overrides: %+v", d)
	}
	d = g.Decide(context.Background(), ent("denied", ""), LedgerView{})
	if d.MaxReplays != 7 || d.Owner != "ops" || d.Backoff.Initial.Seconds() != 2 || d.Backoff.Max.Seconds() != 30 {
		t.Fatalf("defaults: %+v", d)
	}
}

func TestDecisionsAreDeterministicAndEvidenceBound(t *testing.T) {
	g := engine(t, "version: v1\n", nil)
	ctx := context.Background()
	a, b := g.Decide(ctx, ent("denied", ""), LedgerView{}), g.Decide(ctx, ent("denied", ""), LedgerView{})
	if !reflect.DeepEqual(a, b) || a.EvidenceHash == "" || a.PolicySnapshot != "sha256:snap" {
		t.Fatalf("not deterministic:\n%+v\n%+v", a, b)
	}
	other := ent("denied", "")
	other.Payload = []byte(`{"a":2}`)
	if g.Decide(ctx, other, LedgerView{}).EvidenceHash == a.EvidenceHash {
		t.Fatal("evidence hash ignores the payload")
	}
	g2 := *g
	g2.Snapshot = "sha256:new"
	if g2.Decide(ctx, ent("denied", ""), LedgerView{}).EvidenceHash == a.EvidenceHash {
		t.Fatal("evidence hash ignores the policy snapshot")
	}
	if g.Decide(ctx, ent("approval_required", ""), LedgerView{}).EvidenceHash == a.EvidenceHash {
		t.Fatal("evidence hash ignores the reason/class")
	}
	labelled := ent("denied", "")
	labelled.Labels = map[string]string{"risk": "high"}
	if g.Decide(ctx, labelled, LedgerView{}).EvidenceHash == a.EvidenceHash {
		t.Fatal("evidence hash ignores the labels")
	}
	again := ent("denied", "")
	again.Attempts = 9
	if g.Decide(ctx, again, LedgerView{}).EvidenceHash != a.EvidenceHash {
		t.Fatal("reading the same entry again with more attempts made its evidence stale")
	}
	// Formatting of the payload is not evidence.
	pretty := ent("denied", "")
	pretty.Payload = []byte("{\n  \"a\": 1\n}")
	if g.Decide(ctx, pretty, LedgerView{}).EvidenceHash != a.EvidenceHash {
		t.Fatal("a pretty-printed copy of the payload changed the evidence")
	}
}

func TestSnapshotIDs(t *testing.T) {
	r := SourceFile{Name: "rules.yaml", Text: "version: v1\n"}
	p := []SourceFile{{Name: "p.rego", Text: "package replayctl\n"}}
	a := NewSnapshot(r, p)
	if a.ID != NewSnapshot(r, p).ID || !strings.HasPrefix(a.ID, "sha256:") {
		t.Fatal("snapshot id not stable")
	}
	for _, changed := range []Snapshot{
		NewSnapshot(SourceFile{Name: "rules.yaml", Text: "version: v1\n#\n"}, p),
		NewSnapshot(r, []SourceFile{{Name: "q.rego", Text: "package replayctl\n"}}),
		NewSnapshot(r, nil),
	} {
		if changed.ID == a.ID {
			t.Fatal("snapshot id did not change with the text")
		}
	}
}

func TestActionsAndClasses(t *testing.T) {
	if Stricter(AutoReplay, RequireApproval) != RequireApproval || Stricter(Quarantine, ManualReview) != Quarantine {
		t.Fatal("strictness order")
	}
	if _, err := ParseAction("skip"); err == nil {
		t.Fatal("skip is not an action a rule or policy may ask for")
	}
	if c, err := ParseClass(" Transient "); err != nil || c != Transient {
		t.Fatal(c, err)
	}
}
