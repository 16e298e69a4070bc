package policy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/triage"
)

func TestBundledRegoTestsPass(t *testing.T) {
	p, tests := bundled(t)
	res, err := RunTests(context.Background(), append(p, tests...))
	if err != nil {
		t.Fatal(err)
	}
	// Every test_ rule of the bundled test file, each reported once.
	want := strings.Count(tests[0].Text, "\ntest_")
	if len(res) != want || want < 10 {
		t.Fatalf("%d results for %d test rules", len(res), want)
	}
	seen := map[string]bool{}
	for _, r := range res {
		if !r.Pass || r.Skip || r.Error != "" {
			t.Errorf("%s:%d %s failed: %s", r.File, r.Line, r.Name, r.Error)
		}
		if filepath.Base(r.File) != "replayctl_test.rego" || r.Line <= 0 || r.Package != "data.replayctl_test" || !strings.HasPrefix(r.Name, "test_") {
			t.Errorf("result without its place: %+v", r)
		}
		if seen[r.Name] {
			t.Errorf("%s reported twice", r.Name)
		}
		seen[r.Name] = true
	}
	for _, name := range []string{"test_high_risk_escalates_to_approval", "test_payments_need_approval", "test_unknown_action_is_undefined"} {
		if !seen[name] {
			t.Errorf("%s did not run", name)
		}
	}
	// Results come in file, then line, order.
	for i := 1; i < len(res); i++ {
		if res[i-1].File == res[i].File && res[i-1].Line > res[i].Line {
			t.Errorf("results out of order: %s:%d before %s:%d", res[i-1].File, res[i-1].Line, res[i].File, res[i].Line)
		}
	}
}

func TestFailingRegoTestIsReportedWithItsPlace(t *testing.T) {
	p, tests := bundled(t)
	mine := triage.SourceFile{Name: "mine_test.rego", Text: `package mine_test

import data.replayctl

test_wrong if {
	replayctl.decision.action == "quarantine" with input as {"proposed_action": "auto_replay", "class": "transient", "entry": {"labels": {}, "topic": "x"}, "ledger": {}}
}

test_right if {
	replayctl.decision.action == "auto_replay" with input as {"proposed_action": "auto_replay", "class": "transient", "entry": {"labels": {}, "topic": "x"}, "ledger": {}}
}

f(x) := 1 if x > 0

f(x) := 2 if x > 1

test_runtime_error if {
	f(5) == 1
}

todo_test_later if {
	false
}
`}
	res, err := RunTests(context.Background(), append(append(p, tests...), mine))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]TestResult{}
	for _, r := range res {
		if r.File == "mine_test.rego" {
			byName[r.Name] = r
		} else if !r.Pass {
			t.Errorf("bundled test %s failed next to mine", r.Name)
		}
	}
	want := map[string]TestResult{
		"test_wrong":         {File: "mine_test.rego", Line: 5, Package: "data.mine_test", Name: "test_wrong"},
		"test_right":         {File: "mine_test.rego", Line: 9, Package: "data.mine_test", Name: "test_right", Pass: true},
		"test_runtime_error": {File: "mine_test.rego", Line: 17, Package: "data.mine_test", Name: "test_runtime_error"},
		"todo_test_later":    {File: "mine_test.rego", Line: 21, Package: "data.mine_test", Name: "todo_test_later", Skip: true},
	}
	if len(byName) != len(want) {
		t.Fatalf("results for mine_test.rego: %+v", byName)
	}
	for name, w := range want {
		got := byName[name]
		if name == "test_runtime_error" {
			if !strings.Contains(got.Error, "eval_conflict_error") || !strings.Contains(got.Error, "mine_test.rego:15") {
				t.Errorf("%s: error %q, want the conflict with its place", name, got.Error)
			}
			got.Error = ""
		}
		if got != w {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, w)
		}
	}
}

func TestRegoSyntaxErrorIsAConfigError(t *testing.T) {
	p, tests := bundled(t)
	badPolicy := triage.SourceFile{Name: "bad.rego", Text: "package replayctl\n\ndecision := {\"action\" \"auto_replay\"}\n"}
	badTest := triage.SourceFile{Name: "bad_test.rego", Text: "package x_test\n\ntest_a if {\n\t1 == == 2\n}\n"}
	// A file cut short is reported too, at its end.
	cutShort := triage.SourceFile{Name: "short.rego", Text: "package replayctl\n\ndecision := {\n"}
	cases := []struct {
		name  string
		files []triage.SourceFile
		want  []triage.Problem // file and line of each
	}{
		{"a policy", append(append([]triage.SourceFile{}, tests...), badPolicy), []triage.Problem{{File: "bad.rego", Line: 3}}},
		{"a test", append(append([]triage.SourceFile{}, p...), badTest), []triage.Problem{{File: "bad_test.rego", Line: 4}}},
		{"both, reported together", []triage.SourceFile{badPolicy, badTest}, []triage.Problem{{File: "bad.rego", Line: 3}, {File: "bad_test.rego", Line: 4}}},
		{"a file cut short", append(append([]triage.SourceFile{}, tests...), cutShort), []triage.Problem{{File: "short.rego", Line: 4}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := RunTests(context.Background(), c.files)
			if res != nil {
				t.Errorf("results along with a syntax error: %+v", res)
			}
			ps := configProblems(t, err)
			for _, w := range c.want {
				found := false
				for _, p := range ps {
					found = found || (p.File == w.File && p.Line == w.Line && p.Msg != "")
				}
				if !found {
					t.Errorf("no problem at %s:%d in %v", w.File, w.Line, err)
				}
			}
		})
	}
	// The evaluation engine reports the same place.
	_, err := New(context.Background(), []triage.SourceFile{badPolicy}, 0)
	if ps := configProblems(t, err); ps[0].File != "bad.rego" || ps[0].Line != 3 {
		t.Errorf("New: %+v", ps)
	}
}

func TestRegoCompileErrorInTestsIsAConfigError(t *testing.T) {
	p, _ := bundled(t)
	unsafe := triage.SourceFile{Name: "unsafe_test.rego", Text: "package u_test\n\ntest_x if {\n\tx == y\n}\n"}
	_, err := RunTests(context.Background(), append(p, unsafe))
	ps := configProblems(t, err)
	if ps[0].File != "unsafe_test.rego" || ps[0].Line != 4 || !strings.Contains(ps[0].Msg, "unsafe") {
		t.Fatalf("%+v", ps)
	}
}

func TestRunTestsWithoutTests(t *testing.T) {
	p, _ := bundled(t)
	if _, err := RunTests(context.Background(), p); err == nil || !strings.Contains(err.Error(), "no Rego tests found") {
		t.Fatalf("want an error saying there are no tests, got %v", err)
	}
}
