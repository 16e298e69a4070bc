package triage

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// TestEachProblemIsReportedWithItsLine: one mistake per file; each must
// come back as a *ConfigError with a problem at the right line whose
// message says what is wrong (and, where there is one, what is wanted).
func TestEachProblemIsReportedWithItsLine(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		line int
		has  []string
	}{
		// Unknown keys, at every level.
		{"unknown top-level key", "version: v1\ncolour: blue\n",
			2, []string{`unknown field "colour"`, "want one of", "dlq_rules", "version"}},
		{"unknown key in a rule", "version: v1\ndlq_rules:\n  - match: {class: poison}\n    action: quarantine\n    owners: [a]\n",
			5, []string{`unknown field "owners"`, "owner"}},
		{"misspelt action key", "version: v1\ndlq_rules:\n  - match: {class: poison}\n    actoin: quarantine\n",
			4, []string{`unknown field "actoin"`, "action"}},
		{"unknown key in match", "version: v1\ndlq_rules:\n  - match:\n      reason_code: timeout\n      topc: \"a.*\"\n    action: quarantine\n",
			5, []string{`unknown field "topc"`, "topic"}},
		{"unknown key in a rule's backoff", "version: v1\ndlq_rules:\n  - action: auto_replay\n    backoff:\n      strategy: constant\n      jitter: 1\n",
			6, []string{`unknown field "jitter"`, "initial", "multiplier"}},
		{"unknown key in the defaults' backoff", "version: v1\ndefaults:\n  backoff:\n    intial: 1s\n",
			4, []string{`unknown field "intial"`, "initial"}},
		{"unknown key in defaults", "version: v1\ndefaults:\n  ownr: x\n",
			3, []string{`unknown field "ownr"`, "owner"}},
		{"unknown key in a target", "version: v1\ntargets:\n  - name: a\n    exec: {command: [x]}\n    hdrs: 1\n",
			5, []string{`unknown field "hdrs"`, "exec", "http"}},
		{"unknown key in a target's http", "version: v1\ntargets:\n  - http:\n      url: http://x\n      timout: 1s\n",
			5, []string{`unknown field "timout"`, "timeout"}},
		{"unknown key in a target's match", "version: v1\ntargets:\n  - match:\n      labels: {a: b}\n    exec: {command: [x]}\n",
			4, []string{`unknown field "labels"`, "source", "topic"}},
		{"unknown key in a pattern", "version: v1\npatterns:\n  - contain: x\n    class: transient\n",
			3, []string{`unknown field "contain"`, "contains"}},
		{"a key given twice", "version: v1\ndlq_rules:\n  - action: quarantine\n    action: auto_replay\n",
			4, []string{`"action" given twice`}},

		// Values.
		{"bad action", "version: v1\ndlq_rules:\n  - match: {class: poison}\n    action: replay\n",
			4, []string{"dlq_rules[0].action", `unknown action "replay"`, "auto_replay, require_approval, quarantine or manual_review"}},
		{"missing action", "version: v1\ndlq_rules:\n  - match: {class: poison}\n",
			3, []string{"dlq_rules[0]: action is required"}},
		{"bad class in a match", "version: v1\ndlq_rules:\n  - match:\n      class: [poison, flaky]\n    action: quarantine\n",
			4, []string{"dlq_rules[0].match.class", `unknown class "flaky"`, "transient, poison, governance or unknown_commit"}},
		{"bad class in a pattern", "version: v1\npatterns:\n  - {contains: x, class: nope}\n",
			3, []string{"patterns[0].class", `unknown class "nope"`}},
		{"bad class in the taxonomy", "version: v1\ntaxonomy: {flaky: [x]}\n",
			2, []string{"taxonomy", `unknown class "flaky"`}},
		{"bad glob", "version: v1\ndlq_rules:\n  - match:\n      topic: \"[bad\"\n    action: quarantine\n",
			4, []string{"dlq_rules[0].match.topic", `bad glob "[bad"`}},
		{"bad glob in a target", "version: v1\ntargets:\n  - match: {topic: \"{a,\"}\n    exec: {command: [x]}\n",
			3, []string{"targets[0].match.topic", `bad glob "{a,"`}},
		{"unknown source", "version: v1\ndlq_rules:\n  - match: {source: pubsub}\n    action: quarantine\n",
			3, []string{`unknown source kind "pubsub"`, "cordum"}},
		{"bad version", "version: v2\n",
			1, []string{`version: "v2" is not supported`, "want v1"}},
		{"bad version further down", "# rules\n\nversion: \"1\"\n",
			3, []string{`version: "1" is not supported`}},
		{"no version", "dlq_rules: []\n",
			1, []string{`version: "" is not supported`, "want v1"}},
		{"negative max_replays in a rule", "version: v1\ndlq_rules:\n  - action: auto_replay\n    max_replays: -1\n",
			4, []string{"dlq_rules[0].max_replays must be >= 0"}},
		{"negative max_replays in defaults", "version: v1\ndefaults: {max_replays: -2}\n",
			2, []string{"defaults.max_replays must be >= 0"}},
		{"backoff initial > max in a rule", "version: v1\ndlq_rules:\n  - action: auto_replay\n    backoff: {strategy: exponential, initial: 10s, max: 1s}\n",
			4, []string{"dlq_rules[0].backoff", "initial 10s is larger than max 1s"}},
		{"backoff initial > max in defaults", "version: v1\ndefaults:\n  backoff:\n    initial: 1m\n    max: 30s\n",
			4, []string{"defaults.backoff", "initial 1m0s is larger than max 30s"}},
		{"unknown backoff strategy", "version: v1\ndlq_rules:\n  - action: auto_replay\n    backoff: linear\n",
			4, []string{`unknown strategy "linear"`, "exponential_jitter, exponential or constant"}},
		{"negative backoff interval", "version: v1\ndlq_rules:\n  - action: auto_replay\n    backoff: {initial: -1s}\n",
			4, []string{"intervals must be positive"}},
		{"backoff multiplier below 1", "version: v1\ndlq_rules:\n  - action: auto_replay\n    backoff: {multiplier: 0.5}\n",
			4, []string{"multiplier must be >= 1"}},
		{"backoff not a mapping", "version: v1\ndlq_rules:\n  - action: auto_replay\n    backoff: [constant]\n",
			4, []string{"expected a mapping, got a list"}},
		{"min_attempts above max_attempts", "version: v1\ndlq_rules:\n  - match:\n      min_attempts: 5\n      max_attempts: 2\n    action: quarantine\n",
			5, []string{"min_attempts 5 > max_attempts 2"}},

		// Types.
		{"max_replays: many", "version: v1\ndlq_rules:\n  - action: auto_replay\n    max_replays: many\n",
			4, []string{`dlq_rules[0].max_replays: want an integer, got "many"`}},
		{"defaults max_replays: many", "version: v1\ndefaults:\n  max_replays: many\n",
			3, []string{`defaults.max_replays: want an integer, got "many"`}},
		{"min_attempts: lots", "version: v1\ndlq_rules:\n  - match: {min_attempts: lots}\n    action: quarantine\n",
			3, []string{`dlq_rules[0].match.min_attempts: want an integer, got "lots"`}},
		// Issue 14: a wrong-type field was reported as yaml.v3's "cannot
		// unmarshal !!str `three`" without the field's name.
		{"min_attempts: three in a later rule", "version: v1\ndlq_rules:\n  - action: quarantine\n  - match:\n      min_attempts: three\n    action: quarantine\n",
			5, []string{`dlq_rules[1].match.min_attempts: want an integer, got "three"`}},
		{"multiplier: fast", "version: v1\ndefaults:\n  backoff: {multiplier: fast}\n",
			3, []string{`defaults.backoff.multiplier: want a number, got "fast"`}},
		{"owner a list", "version: v1\ndefaults:\n  owner: [a, b]\n",
			3, []string{`defaults.owner: want a string, got a list`}},
		{"labels value a mapping", "version: v1\ndlq_rules:\n  - match:\n      labels: {team: {a: b}}\n    action: quarantine\n",
			4, []string{`dlq_rules[0].match.labels.team: want a string, got a mapping`}},
		{"reason_code a mapping", "version: v1\ndlq_rules:\n  - match:\n      reason_code: {a: b}\n    action: quarantine\n",
			4, []string{"expected a string or a list of strings, got a mapping"}},
		{"reason_code list of lists", "version: v1\ndlq_rules:\n  - match:\n      reason_code: [[a]]\n    action: quarantine\n",
			4, []string{"expected a string, got a list"}},
		{"a rule that is a string", "version: v1\ndlq_rules:\n  - quarantine everything\n",
			3, []string{"expected a mapping, got a scalar"}},
		{"dlq_rules a mapping", "version: v1\ndlq_rules: {a: 1}\n",
			2, []string{"dlq_rules: want a list, got a mapping"}},
		{"defaults a list", "version: v1\ndefaults: [1]\n",
			2, []string{"expected a mapping, got a list"}},
		{"bad duration", "version: v1\ndefaults:\n  backoff: {initial: soon}\n",
			3, []string{`defaults.backoff.initial: want a duration such as 30s or 2m, got "soon"`}},

		// Targets and patterns.
		{"target with neither http nor exec", "version: v1\ntargets:\n  - name: x\n    match: {topic: a}\n",
			3, []string{"targets[0]: set exactly one of http, exec, cordum or nexora"}},
		{"target with both http and exec", "version: v1\ntargets:\n  - http: {url: http://x}\n    exec: {command: [x]}\n",
			3, []string{"targets[0]: set exactly one of http, exec, cordum or nexora"}},
		{"target url not http", "version: v1\ntargets:\n  - http: {url: ftp://x}\n",
			3, []string{"targets[0].http.url", `"ftp://x" is not an http(s) URL`}},
		{"target probe not http", "version: v1\ntargets:\n  - http: {url: http://x, probe: x}\n",
			3, []string{"targets[0].http.probe", "not an http(s) URL"}},
		{"target exec without a command", "version: v1\ntargets:\n  - exec: {command: []}\n",
			3, []string{"targets[0].exec.command", "give the program and its arguments as a list"}},
		{"target names repeated", "version: v1\ntargets:\n  - {name: a, exec: {command: [x]}}\n  - {name: a, exec: {command: [y]}}\n",
			4, []string{`targets[1].name: "a" already used by targets[0]`}},
		{"target unknown source", "version: v1\ntargets:\n  - match: {source: pubsub}\n    exec: {command: [x]}\n",
			3, []string{`unknown source kind "pubsub"`}},
		{"pattern with both contains and regex", "version: v1\npatterns:\n  - {contains: x, regex: y, class: transient}\n",
			3, []string{"patterns[0]: set exactly one of contains or regex"}},
		{"pattern with neither", "version: v1\npatterns:\n  - {class: transient}\n",
			3, []string{"patterns[0]: set exactly one of contains or regex"}},
		{"pattern with a bad regex", "version: v1\npatterns:\n  - {regex: '(', class: transient}\n",
			3, []string{"patterns[0].regex", "missing closing )"}},

		// The whole file.
		{"empty file", "", 0, []string{"empty rules file", "version: v1"}},
		{"blank file", "  \n\n\t\n", 0, []string{"empty rules file"}},
		{"a list", "- a\n- b\n", 1, []string{"must be a mapping with version and dlq_rules"}},
		{"a string", "just text\n", 1, []string{"must be a mapping"}},
		{"comments only", "# nothing here\n", 0, []string{"must be a mapping"}},
		{"YAML syntax error", "version: v1\ndlq_rules: [\n", 2, []string{"did not find expected node content"}},
		{"tab indentation", "version: v1\ndlq_rules:\n\t- action: quarantine\n", 3, []string{"found character that cannot start any token"}},
		{"bad indentation", "version: v1\n  bad: indent\n", 2, []string{"mapping values are not allowed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := ParseRules("bad.yaml", []byte(c.yaml))
			if r != nil {
				t.Errorf("rules returned along with an error")
			}
			ps := configProblems(t, err, "bad.yaml")
			p, ok := findProblem(ps, c.line, c.has...)
			if !ok {
				t.Fatalf("no problem at line %d mentioning %q in:\n%s", c.line, c.has, problemList(ps))
			}
			want := fmt.Sprintf("bad.yaml:%d: ", c.line)
			if c.line == 0 {
				want = "bad.yaml: "
			}
			if !strings.Contains(err.Error(), want+p.Msg) {
				t.Errorf("error text %q does not show %q", err.Error(), want+p.Msg)
			}
			// Users know the file, not replayctl's Go types.
			for _, q := range ps {
				if strings.Contains(q.Msg, "triage.") || strings.Contains(q.Msg, "[]string") {
					t.Errorf("message names a Go type: %q", q.Msg)
				}
			}
		})
	}
}

// TestAllProblemsAreReportedAtOnce: a file with many mistakes reports every
// one of them, in line order, in one *ConfigError.
func TestAllProblemsAreReportedAtOnce(t *testing.T) {
	const text = `version: v2
colour: blue
defaults:
  max_replays: -1
  backoff: {initial: 10s, max: 1s}
taxonomy:
  flaky: [x]
patterns:
  - {regex: '(', class: transient}
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
  - match: {source: pubsub}
    action: auto_replay
    max_replays: -3
targets:
  - name: t
    http: {url: ftp://x}
    hdrs: 1
`
	want := []struct {
		line int
		has  string
	}{
		{1, `version: "v2" is not supported`},
		{2, `unknown field "colour"`},
		{4, "defaults.max_replays must be >= 0"},
		{5, "defaults.backoff: initial 10s is larger than max 1s"},
		{6, `unknown class "flaky"`},
		{9, "patterns[0].regex"},
		{13, `unknown field "topc"`},
		{14, `unknown action "replay"`},
		{15, `dlq_rules[1].match.class: unknown class "flaky"`},
		{17, `dlq_rules[1].max_replays: want an integer, got "many"`},
		{18, `bad glob "[bad"`},
		{20, "dlq_rules[2].backoff: initial 10s is larger than max 1s"},
		{21, `unknown source kind "pubsub"`},
		{23, "dlq_rules[3].max_replays must be >= 0"},
		{26, "targets[0].http.url"},
		{27, `unknown field "hdrs"`},
	}
	_, err := ParseRules("bad.yaml", []byte(text))
	ps := configProblems(t, err, "bad.yaml")
	for _, w := range want {
		if _, ok := findProblem(ps, w.line, w.has); !ok {
			t.Errorf("no problem at line %d mentioning %q", w.line, w.has)
		}
	}
	if len(ps) < len(want) {
		t.Errorf("%d problems reported, want at least %d", len(ps), len(want))
	}
	if !sort.SliceIsSorted(ps, func(i, j int) bool { return ps[i].Line < ps[j].Line }) {
		t.Errorf("problems are not in line order")
	}
	if t.Failed() {
		t.Logf("problems:\n%s", problemList(ps))
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != len(ps) {
		t.Errorf("error text has %d lines for %d problems", got, len(ps))
	}
}

func TestConfigErrorText(t *testing.T) {
	ce := &ConfigError{Problems: []Problem{
		{File: "rules.yaml", Line: 3, Msg: "unknown field \"x\""},
		{File: "policies", Msg: "no policy files"},
	}}
	want := "rules.yaml:3: unknown field \"x\"\npolicies: no policy files"
	if ce.Error() != want {
		t.Fatalf("Error() = %q, want %q", ce.Error(), want)
	}
	if (&ConfigError{}).orNil() != nil {
		t.Fatal("a ConfigError without problems is not nil")
	}
}

func TestValidRulesHaveNoProblems(t *testing.T) {
	// Every section at once, each in its accepted forms.
	_, err := ParseRules("ok.yaml", []byte(`version: v1
defaults:
  max_replays: 0
  backoff: exponential
  owner: ops
  approver_group: oncall
taxonomy:
  transient: [a, B]
  poison: []
patterns:
  - {contains: x, class: Poison}
  - {regex: "^y+$", class: governance}
dlq_rules:
  - name: everything
    match:
      reason_code: [a, b]
      class: [transient, POISON]
      topic: ["x.**", "y.*"]
      source: [cordum, cordum-redis, prodigy, nexora, jsonl]
      min_attempts: 0
      max_attempts: 0
      labels: {team: a}
    action: " Require_Approval "
    max_replays: 1
    backoff: {strategy: constant, initial: 1s, max: 1s, multiplier: 1}
    owner: o
    approver_group: g
  - action: quarantine
targets:
  - name: h
    match: {topic: "x.**", source: cordum}
    http: {url: "https://h/r", probe: "http://h/p", timeout: 2s, headers: {X-A: b}}
  - exec: {command: [run, it], timeout: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
}

func TestDefaultsProblemsPointAtTheirOwnLine(t *testing.T) {
	// Issue 14: it was reported at the line of the `defaults:` key.
	_, err := ParseRules("bad.yaml", []byte("version: v1\ndefaults:\n  owner: ops\n  max_replays: -1\n"))
	ps := configProblems(t, err, "bad.yaml")
	if _, ok := findProblem(ps, 4, "defaults.max_replays must be >= 0"); !ok {
		t.Fatalf("want the problem at line 4:\n%s", problemList(ps))
	}
}
