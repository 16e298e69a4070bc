package policy

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/triage"
)

// The bundled policy reads five ground input paths, so it is memoised by
// exactly those.
func TestMemoReadSetOfTheBundledPolicy(t *testing.T) {
	pols, _ := bundled(t)
	eng := mustNew(t, 0, pols...)
	if ok, why := eng.Memoised(); !ok {
		t.Fatalf("bundled policy not memoised: %s", why)
	}
	var got []string
	for _, p := range eng.memo.paths {
		got = append(got, p.String())
	}
	want := []string{"class", "entry.labels.risk", "entry.topic", "ledger.probe", "proposed_action"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read set %v, want %v", got, want)
	}
}

// A policy whose decision may depend on more than fixed input paths, or
// that reads what differs for every entry, is never memoised.
func TestMemoOffWhenTheReadSetIsUnknownOrUseless(t *testing.T) {
	for name, body := range map[string]string{
		"reads input.entry.id": `decision := {"action": "manual_review", "reasons": [input.entry.id]}`,
		"reads the key":        `decision := {"action": "manual_review", "reasons": []} if input.entry.idempotency_key != ""`,
		"reads input.entry":    `decision := {"action": "manual_review", "reasons": []} if count(input.entry) > 0`,
		"uses input whole":     `decision := {"action": "manual_review", "reasons": []} if { x := input; x.class != "" }`,
		"dynamic path":         `decision := {"action": "manual_review", "reasons": [k]} if { some k; input.entry.labels[k] == "x" }`,
		"walks the input":      `decision := {"action": "manual_review", "reasons": []} if { walk(input.ledger, [_, v]); v == 1 }`,
	} {
		t.Run(name, func(t *testing.T) {
			eng := mustNew(t, 0, regoFile("p.rego", body))
			if ok, why := eng.Memoised(); ok || why == "" || strings.HasPrefix(why, "modules do not compile") {
				t.Fatalf("memoised %v: %q", ok, why)
			}
		})
	}
	// Builtins that answer differently each time. The live engine refuses
	// most of them at compile time; the analysis does not rely on that.
	for _, call := range []string{"time.now_ns()", "rand.intn(\"x\", 10)", "uuid.rfc4122(\"x\")",
		"http.send({\"method\": \"get\", \"url\": \"http://x\"})", "opa.runtime()", "net.lookup_ip_addr(\"x\")"} {
		t.Run(call, func(t *testing.T) {
			f := regoFile("p.rego", `decision := {"action": input.proposed_action, "reasons": []} if { x := `+call+`; x != null }`)
			if m, why := newMemo([]triage.SourceFile{f}, 8); m != nil || !strings.Contains(why, strings.SplitN(call, "(", 2)[0]) {
				t.Fatalf("memo %v, reason %q", m != nil, why)
			}
		})
	}
}

// Decisions are the same with and without the memo, over the testdata
// corpora and a generated one, for every ledger state a run meets.
func TestMemoDecisionsIdenticalWithAndWithout(t *testing.T) {
	pols, _ := bundled(t)
	rules, err := triage.ParseRules("rules.yaml", []byte(memoRules))
	if err != nil {
		t.Fatal(err)
	}
	on := mustNew(t, 0, pols...)
	off := mustNew(t, 0, pols...)
	off.memo = nil
	with := &triage.Engine{Rules: rules, Policy: on, Snapshot: "s"}
	without := &triage.Engine{Rules: rules, Policy: off, Snapshot: "s"}

	genSpec, err := gen.Write(jsonl.GenFormat(), filepath.Join(t.TempDir(), "gen.jsonl"), gen.Options{N: 2000, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	specs := []string{genSpec,
		"jsonl:../../testdata/jsonl/entries.jsonl",
		"cordum:../../testdata/cordum/dlq.jsonl",
		"nexora:../../testdata/nexora/dead-letters.json",
		"prodigy:../../testdata/prodigy",
	}
	views := []triage.LedgerView{{}, {State: triage.StateOutcomeUnknown, Probe: triage.ProbeNotCommitted},
		{State: triage.StateOutcomeUnknown}, {State: "decided", Replays: 1, Approved: true}}
	n := 0
	for _, spec := range specs {
		src, err := source.Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		for e, err := range src.Entries(context.Background()) {
			if err != nil {
				t.Fatalf("%s: %v", spec, err)
			}
			for _, v := range views {
				a, b := with.Decide(context.Background(), &e, v), without.Decide(context.Background(), &e, v)
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("%s %s: with the memo %+v, without %+v", spec, e.Ref(), a, b)
				}
				n++
			}
		}
	}
	if hits := n - on.memo.cache.Len(); n < 8000 || hits < n/2 {
		t.Fatalf("%d decisions, %d distinct projections: the memo was not exercised", n, on.memo.cache.Len())
	}
}

// memoRules sends payments and high-risk entries the policy's way too.
const memoRules = `version: v1
defaults: {max_replays: 3, owner: ops, approver_group: ops}
dlq_rules:
  - name: flaky
    match: {topic: "tool.flaky.**"}
    action: auto_replay
`

// A policy error is never remembered: the same input fails again, and
// the decision fails closed each time, while other inputs are memoised.
func TestMemoPolicyErrorStillFailsClosed(t *testing.T) {
	eng := mustNew(t, 0, regoFile("p.rego", `decision := {"action": input.proposed_action, "reasons": [sprintf("n=%v", [to_number(input.entry.labels.n)])]}`))
	if ok, why := eng.Memoised(); !ok {
		t.Fatalf("not memoised: %s", why)
	}
	in := func(n string) *triage.PolicyInput {
		return &triage.PolicyInput{Entry: &entry.Entry{ID: "x", Labels: map[string]string{"n": n}}, ProposedAction: triage.AutoReplay}
	}
	for i := range 2 {
		if _, err := eng.Evaluate(context.Background(), in("not a number")); err == nil {
			t.Fatalf("evaluation %d of a failing input succeeded", i+1)
		}
		res, err := eng.Evaluate(context.Background(), in("3"))
		if err != nil || res.Action != triage.AutoReplay || len(res.Reasons) != 1 || res.Reasons[0] != "n=3" {
			t.Fatalf("evaluation %d: %+v %v", i+1, res, err)
		}
	}
	if eng.memo.cache.Len() != 1 {
		t.Fatalf("memo holds %d results, want only the answer", eng.memo.cache.Len())
	}
	rules, err := triage.ParseRules("rules.yaml", []byte(memoRules))
	if err != nil {
		t.Fatal(err)
	}
	g := &triage.Engine{Rules: rules, Policy: eng}
	for range 2 {
		e := entry.Entry{ID: "y", Source: "jsonl", Topic: "tool.flaky.a", ReasonCode: "timeout", Labels: map[string]string{"n": "nope"}}
		e.EnsureKey()
		if d := g.Decide(context.Background(), &e, triage.LedgerView{}); d.Action != triage.ManualReview || d.PolicyError == "" {
			t.Fatalf("a policy error did not fail closed: %s %q", d.Action, d.PolicyError)
		}
	}
}

// The memo key tells an absent path from an empty one.
func TestMemoKeyTellsAbsentFromEmpty(t *testing.T) {
	m := &memo{paths: []ast.Ref{ast.MustParseRef("x.entry.labels.risk")[1:]}}
	withEmpty, _ := m.key(&triage.PolicyInput{Entry: &entry.Entry{Labels: map[string]string{"risk": ""}}})
	absent, _ := m.key(&triage.PolicyInput{Entry: &entry.Entry{}})
	if withEmpty == absent {
		t.Fatal("an empty label and no label share a key")
	}
}

// The paths the memo reads straight from the input agree with the whole
// input the policy is evaluated on, for every path it knows and a few
// it does not.
func TestMemoLeafAgreesWithTheWholeInput(t *testing.T) {
	ins := []*triage.PolicyInput{
		{Entry: &entry.Entry{}},
		{Entry: &entry.Entry{ID: "a", Source: "cordum", Topic: "payments.x", ReasonCode: "timeout", Message: "m\"q",
			Attempts: 7, IdempotencyKey: "k", Labels: map[string]string{"risk": "HIGH", "team": "t"}},
			Class: triage.Transient, Unrecognised: true, Rule: "r", RuleMatched: true, ProposedAction: triage.AutoReplay,
			Owner: "o", ApproverGroup: "g", MaxReplays: 3,
			Ledger: triage.LedgerView{State: "decided", Replays: 2, Approved: true, Probe: triage.ProbeNotCommitted}},
	}
	var paths []ast.Ref
	for _, s := range []string{"class", "unrecognised", "rule", "rule_matched", "proposed_action", "owner",
		"approver_group", "max_replays", "entry.source", "entry.topic", "entry.reason_code", "entry.message",
		"entry.attempts", "entry.labels.risk", "entry.labels.team", "entry.labels.none", "ledger.state",
		"ledger.replays", "ledger.approved", "ledger.probe", "ledger.nope", "nope", "class.deeper",
		"entry.source_state.status", "entry.labels", "ledger"} {
		paths = append(paths, ast.MustParseRef("input." + s)[1:])
	}
	for i, in := range ins {
		whole := inputValue(in)
		for _, p := range paths {
			want, err := whole.Find(p)
			v, found, ok := leaf(in, p)
			if !ok {
				continue // looked up in the whole input
			}
			if found != (err == nil) || found && v.Compare(want) != 0 {
				t.Errorf("input %d, %v: leaf %v (found %v), whole input %v (%v)", i, p, v, found, want, err)
			}
		}
	}
}

// Review finding 4: the net.cidr_* builtins are deterministic (OPA does
// not flag them Nondeterministic), so a policy matching a label against a
// CIDR is memoised; one resolving a name (net.lookup_ip_addr, flagged
// Nondeterministic by OPA) is not.
func TestMemoNetBuiltinsByOPAsFlag(t *testing.T) {
	for call, memoised := range map[string]bool{
		`net.cidr_contains("10.0.0.0/8", input.entry.labels.ip)`:           true,
		`net.cidr_contains_matches(["10.0.0.0/8"], input.entry.labels.ip)`: true,
		`net.lookup_ip_addr(input.entry.labels.host)`:                      false,
	} {
		name := strings.SplitN(call, "(", 2)[0]
		if b, ok := ast.BuiltinMap[name]; !ok || b.Nondeterministic == memoised {
			t.Fatalf("OPA's %s: known %v, Nondeterministic %v; the test assumes %v", name, ok, ok && b.Nondeterministic, !memoised)
		}
		t.Run(name, func(t *testing.T) {
			f := regoFile("p.rego", `decision := {"action": input.proposed_action, "reasons": []} if { x := `+call+`; x }`)
			m, why := newMemo([]triage.SourceFile{f}, 8)
			if (m != nil) != memoised {
				t.Fatalf("memoised %v, want %v (%q)", m != nil, memoised, why)
			}
			if !memoised && !strings.Contains(why, name) {
				t.Fatalf("reason %q does not name %s", why, name)
			}
		})
	}
}
