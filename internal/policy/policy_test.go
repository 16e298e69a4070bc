package policy

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/triage"
)

func bundled(t *testing.T) (policies, tests []triage.SourceFile) {
	t.Helper()
	p, tt, err := ReadDir("../../policies")
	if err != nil {
		t.Fatal(err)
	}
	return p, tt
}

func input(topic string, labels map[string]string, class triage.Class, proposed triage.Action) *triage.PolicyInput {
	e := &entry.Entry{ID: "j1", Source: entry.KindCordum, Topic: topic, ReasonCode: "timeout", Attempts: 3, Labels: labels}
	e.EnsureKey()
	return &triage.PolicyInput{Entry: e, Class: class, Rule: "default:" + string(class), ProposedAction: proposed, MaxReplays: 3}
}

func TestBundledPolicy(t *testing.T) {
	p, _ := bundled(t)
	eng, err := New(context.Background(), p, 0)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		in   *triage.PolicyInput
		want triage.Action
	}{
		{input("tool.email.send", nil, triage.Transient, triage.AutoReplay), triage.AutoReplay},
		{input("tool.email.send", map[string]string{"risk": "high"}, triage.Transient, triage.AutoReplay), triage.RequireApproval},
		{input("payments.charge.create", nil, triage.Transient, triage.AutoReplay), triage.RequireApproval},
		{input("tool.email.send", nil, triage.Governance, triage.AutoReplay), triage.RequireApproval},
		{input("tool.email.send", nil, triage.UnknownCommit, triage.AutoReplay), triage.ManualReview},
		{input("tool.email.send", map[string]string{"risk": "high"}, triage.Poison, triage.Quarantine), triage.Quarantine},
	}
	for i, c := range cases {
		res, err := eng.Evaluate(context.Background(), c.in)
		if err != nil || res.Action != c.want {
			t.Errorf("case %d: %s %v, want %s", i, res.Action, err, c.want)
		}
	}
}

func TestBundledRegoTestsPass(t *testing.T) {
	p, tt := bundled(t)
	res, err := RunTests(context.Background(), append(p, tt...))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) < 5 {
		t.Fatalf("only %d tests", len(res))
	}
	for _, r := range res {
		if !r.Pass {
			t.Errorf("%s:%d %s failed: %s", r.File, r.Line, r.Name, r.Error)
		}
	}
}

func TestFailingRegoTestIsReportedWithItsPlace(t *testing.T) {
	p, _ := bundled(t)
	failing := triage.SourceFile{Name: "mine_test.rego", Text: "package mine_test\n\nimport data.replayctl\n\ntest_wrong if {\n\treplayctl.decision.action == \"quarantine\" with input as {\"proposed_action\": \"auto_replay\", \"class\": \"transient\", \"entry\": {\"labels\": {}, \"topic\": \"x\"}}\n}\n"}
	res, err := RunTests(context.Background(), append(p, failing))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Pass || res[0].File != "mine_test.rego" || res[0].Line != 5 {
		t.Fatalf("%+v", res)
	}
}

func configProblems(t *testing.T, err error) []triage.Problem {
	t.Helper()
	var ce *triage.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *triage.ConfigError, got %v", err)
	}
	return ce.Problems
}

func TestSyntaxErrorHasFileAndLine(t *testing.T) {
	_, err := New(context.Background(), []triage.SourceFile{{Name: "bad.rego", Text: "package replayctl\n\ndecision := {\n"}}, 0)
	ps := configProblems(t, err)
	if ps[0].File != "bad.rego" || ps[0].Line == 0 {
		t.Fatalf("%+v", ps)
	}
	_, err = RunTests(context.Background(), []triage.SourceFile{{Name: "bad_test.rego", Text: "package x\n\ntest_a if {\n"}})
	if ps := configProblems(t, err); ps[0].File != "bad_test.rego" {
		t.Fatalf("%+v", ps)
	}
}

func TestNetworkAndRuntimeBuiltinsAreNotAvailable(t *testing.T) {
	for _, call := range []string{
		`http.send({"method": "GET", "url": "http://example.com"})`,
		`net.lookup_ip_addr("example.com")`,
		`opa.runtime()`,
	} {
		src := "package replayctl\n\nx := " + call + "\n\ndecision := {\"action\": input.proposed_action, \"reasons\": [x]}\n"
		_, err := New(context.Background(), []triage.SourceFile{{Name: "net.rego", Text: src}}, 0)
		ps := configProblems(t, err)
		if ps[0].File != "net.rego" || ps[0].Line != 3 {
			t.Errorf("%s: %+v", call, ps)
		}
	}
}

func TestFailClosed(t *testing.T) {
	cases := map[string]string{
		"undefined":          "package replayctl\n\ndecision := {\"action\": \"auto_replay\"} if input.class == \"nothing\"\n",
		"not an object":      "package replayctl\n\ndecision := \"auto_replay\"\n",
		"no action":          "package replayctl\n\ndecision := {\"reasons\": []}\n",
		"unknown action":     "package replayctl\n\ndecision := {\"action\": \"replay_twice\"}\n",
		"skip is not a verb": "package replayctl\n\ndecision := {\"action\": \"skip\"}\n",
		"reasons not list":   "package replayctl\n\ndecision := {\"action\": \"auto_replay\", \"reasons\": \"x\"}\n",
		"reason not string":  "package replayctl\n\ndecision := {\"action\": \"auto_replay\", \"reasons\": [1]}\n",
		"conflict":           "package replayctl\n\ndecision := {\"action\": \"auto_replay\"}\ndecision := {\"action\": \"quarantine\"} if input.class == \"transient\"\n",
		"builtin error":      "package replayctl\n\ndecision := {\"action\": \"auto_replay\", \"reasons\": [sprintf(\"%d\", [to_number(\"x\")])]}\n",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			eng, err := New(context.Background(), []triage.SourceFile{{Name: name + ".rego", Text: src}}, 0)
			if err != nil {
				// A conflict may already be refused when compiling.
				configProblems(t, err)
				return
			}
			if _, err := eng.Evaluate(context.Background(), input("tool.x", nil, triage.Transient, triage.AutoReplay)); err == nil {
				t.Fatal("evaluation succeeded")
			}
			// Through the engine the entry fails closed to manual_review.
			rules, _ := triage.ParseRules("r.yaml", []byte("version: v1\n"))
			g := &triage.Engine{Rules: rules, Policy: eng}
			e := &entry.Entry{ID: "j", Source: "cordum", ReasonCode: "timeout"}
			e.EnsureKey()
			if d := g.Decide(context.Background(), e, triage.LedgerView{}); d.Action != triage.ManualReview || d.PolicyError == "" {
				t.Fatalf("decided %s (policy error %q)", d.Action, d.PolicyError)
			}
		})
	}
	if !errors.Is(func() error {
		eng, _ := New(context.Background(), []triage.SourceFile{{Name: "u.rego", Text: cases["undefined"]}}, 0)
		_, err := eng.Evaluate(context.Background(), input("x", nil, triage.Transient, triage.AutoReplay))
		return err
	}(), ErrUndefined) {
		t.Fatal("an undefined decision is not ErrUndefined")
	}
}

func TestTimeoutFailsClosed(t *testing.T) {
	slow := "package replayctl\n\nn := count([x | some x in numbers.range(1, 3000000)])\n\ndecision := {\"action\": input.proposed_action, \"reasons\": [sprintf(\"%d\", [n])]}\n"
	eng, err := New(context.Background(), []triage.SourceFile{{Name: "slow.rego", Text: slow}}, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Evaluate(context.Background(), input("x", nil, triage.Transient, triage.AutoReplay)); err == nil {
		t.Fatal("a policy running past its time limit succeeded")
	}
}

func TestConcurrentEvaluation(t *testing.T) {
	p, _ := bundled(t)
	eng, err := New(context.Background(), p, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			labels := map[string]string{}
			want := triage.AutoReplay
			if i%2 == 0 {
				labels["risk"], want = "high", triage.RequireApproval
			}
			for range 50 {
				res, err := eng.Evaluate(context.Background(), input("tool.email.send", labels, triage.Transient, triage.AutoReplay))
				if err != nil || res.Action != want {
					t.Errorf("goroutine %d: %s %v", i, res.Action, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestLoadEngineReportsBothFiles(t *testing.T) {
	dir := t.TempDir()
	_, _, err := LoadEngine(context.Background(), dir+"/missing.yaml", dir, 0)
	ps := configProblems(t, err)
	if len(ps) != 2 || !strings.Contains(ps[0].Msg, "cannot read rules") || !strings.Contains(ps[1].Msg, "no policy files") {
		t.Fatalf("want both the rules and the policy problem: %+v", ps)
	}
}

func BenchmarkEvaluate(b *testing.B) {
	p, _, err := ReadDir("../../policies")
	if err != nil {
		b.Fatal(err)
	}
	eng, err := New(context.Background(), p, 0)
	if err != nil {
		b.Fatal(err)
	}
	in := input("tool.email.send", map[string]string{"team": "growth"}, triage.Transient, triage.AutoReplay)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := eng.Evaluate(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}
