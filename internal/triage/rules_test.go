package triage

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// cordumSeed is the DLQ triage policy from Cordum's write-up, as published.
const cordumSeed = `version: v1
dlq_rules:
- match:
    reason_code: max_scheduling_retries
  action: auto_replay
  max_replays: 2
  backoff: exponential_jitter
- match:
    reason_code: schema_invalid
  action: quarantine
  owner: integration-team
- match:
    reason_code: denied
  action: require_approval
  approver_group: platform-governance
- match:
    reason_code: unknown_commit_state
  action: manual_review
`

func TestCordumSeedLoadsAsIs(t *testing.T) {
	r, err := ParseRules("seed.yaml", []byte(cordumSeed))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.DLQRules) != 4 {
		t.Fatalf("%d rules", len(r.DLQRules))
	}
	first := r.DLQRules[0]
	if first.action != AutoReplay || *first.MaxReplays != 2 || first.Backoff.Strategy != BackoffExponentialJitter {
		t.Fatalf("rule 0: %+v", first)
	}
	if r.DLQRules[1].Owner != "integration-team" || r.DLQRules[2].ApproverGroup != "platform-governance" || r.DLQRules[3].action != ManualReview {
		t.Fatalf("rules: %+v", r.DLQRules)
	}
}

func TestBundledRulesLoad(t *testing.T) {
	data, err := os.ReadFile("../../rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseRules("rules.yaml", data); err != nil {
		t.Fatal(err)
	}
}

func problems(t *testing.T, yaml string) []Problem {
	t.Helper()
	_, err := ParseRules("bad.yaml", []byte(yaml))
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *ConfigError, got %v", err)
	}
	for _, p := range ce.Problems {
		if p.File != "bad.yaml" {
			t.Errorf("problem without its file: %+v", p)
		}
	}
	return ce.Problems
}

func TestEveryProblemIsReportedWithItsLine(t *testing.T) {
	got := problems(t, `version: v1
colour: blue
dlq_rules:
  - match:
      reason_code: timeout
      topc: "a.*"
    action: replay
  - match: {class: flaky}
    action: auto_replay
    max_replays: many
  - match: {topic: "[bad"}
    action: quarantine
    backoff: {strategy: exponential, initial: 10s, max: 1s}
`)
	want := []struct {
		line int
		has  string
	}{
		{2, `unknown field "colour"`},
		{6, `unknown field "topc"`},
		{7, `unknown action "replay"`},
		{8, `unknown class "flaky"`},
		{10, "many"},
		{11, `bad glob "[bad"`},
		{13, "initial 10s is larger than max 1s"},
	}
	for _, w := range want {
		found := false
		for _, p := range got {
			found = found || (p.Line == w.line && strings.Contains(p.Msg, w.has))
		}
		if !found {
			t.Errorf("no problem at line %d mentioning %q in:\n%v", w.line, w.has, (&ConfigError{Problems: got}).Error())
		}
	}
}

func TestSmallerRuleProblems(t *testing.T) {
	cases := []struct {
		name, yaml, has string
		line            int
	}{
		{"version", "version: v2\n", `"v2" is not supported`, 1},
		{"empty", "", "empty rules file", 0},
		{"not a mapping", "- a\n- b\n", "must be a mapping", 1},
		{"syntax", "version: v1\ndlq_rules: [\n", "did not find expected", 2},
		{"negative max_replays", "version: v1\ndlq_rules:\n  - action: auto_replay\n    max_replays: -1\n", "max_replays must be >= 0", 4},
		{"missing action", "version: v1\ndlq_rules:\n  - match: {class: poison}\n", "action is required", 3},
		{"unknown source", "version: v1\ndlq_rules:\n  - match: {source: kafka}\n    action: quarantine\n", `unknown source kind "kafka"`, 3},
		{"backoff key", "version: v1\ndlq_rules:\n  - action: auto_replay\n    backoff: {strategy: constant, jitter: 1}\n", `unknown field "jitter"`, 4},
		{"target without kind", "version: v1\ntargets:\n  - name: x\n    match: {topic: a}\n", "exactly one of http or exec", 3},
		{"target url", "version: v1\ntargets:\n  - http: {url: ftp://x}\n", "not an http(s) URL", 3},
		{"pattern", "version: v1\npatterns:\n  - {contains: x, regex: y, class: transient}\n", "exactly one of contains or regex", 3},
		{"taxonomy class", "version: v1\ntaxonomy: {flaky: [x]}\n", `unknown class "flaky"`, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := problems(t, c.yaml)
			for _, p := range got {
				if strings.Contains(p.Msg, c.has) && (c.line == 0 || p.Line == c.line) {
					return
				}
			}
			t.Fatalf("no problem at line %d mentioning %q: %v", c.line, c.has, got)
		})
	}
}

func FuzzParseRules(f *testing.F) {
	bundled, _ := os.ReadFile("../../rules.yaml")
	for _, s := range []string{string(bundled), cordumSeed, "version: v1\n", "version: v1\ndlq_rules: [", "- x", "{}", "version: v1\ndlq_rules:\n  - match: {topic: '**'}\n    action: quarantine\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r, err := ParseRules("f.yaml", []byte(in))
		if err == nil {
			if r == nil {
				t.Fatal("no rules and no error")
			}
			return
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) == 0 {
			t.Fatalf("error is not a *ConfigError with problems: %v", err)
		}
		for _, p := range ce.Problems {
			if p.File != "f.yaml" || p.Msg == "" {
				t.Fatalf("problem without file or message: %+v", p)
			}
		}
	})
}
