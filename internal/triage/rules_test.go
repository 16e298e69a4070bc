package triage

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
)

// cordumSeed is the "DLQ triage policy (YAML)" of Cordum's write-up
// (/work/shared/seeds/cordum-dlq-triage.md), indented as in rules.yaml.
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

// cordumSeedCompact is the same file with the list items at column 0, as
// the write-up prints it: equally valid YAML, and it must load the same.
const cordumSeedCompact = `version: v1
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
	for name, text := range map[string]string{"indented": cordumSeed, "compact": cordumSeedCompact} {
		t.Run(name, func(t *testing.T) {
			r, err := ParseRules("seed.yaml", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.DLQRules) != 4 {
				t.Fatalf("%d rules, want 4", len(r.DLQRules))
			}
			want := []struct {
				code     string
				action   Action
				max      *int
				strategy string
				owner    string
				approver string
			}{
				{"max_scheduling_retries", AutoReplay, ptr(2), BackoffExponentialJitter, "", ""},
				{"schema_invalid", Quarantine, nil, "", "integration-team", ""},
				{"denied", RequireApproval, nil, "", "", "platform-governance"},
				{"unknown_commit_state", ManualReview, nil, "", "", ""},
			}
			for i, w := range want {
				rl := r.DLQRules[i]
				if len(rl.Match.ReasonCode) != 1 || rl.Match.ReasonCode[0] != w.code {
					t.Errorf("rule %d matches reason codes %q, want [%s]", i, rl.Match.ReasonCode, w.code)
				}
				if rl.action != w.action {
					t.Errorf("rule %d: action %s, want %s", i, rl.action, w.action)
				}
				if (rl.MaxReplays == nil) != (w.max == nil) || (w.max != nil && *rl.MaxReplays != *w.max) {
					t.Errorf("rule %d: max_replays %v, want %v", i, rl.MaxReplays, w.max)
				}
				if (rl.Backoff == nil) != (w.strategy == "") || (rl.Backoff != nil && rl.Backoff.Strategy != w.strategy) {
					t.Errorf("rule %d: backoff %+v, want strategy %q", i, rl.Backoff, w.strategy)
				}
				if rl.Owner != w.owner || rl.ApproverGroup != w.approver {
					t.Errorf("rule %d: owner %q approver_group %q, want %q %q", i, rl.Owner, rl.ApproverGroup, w.owner, w.approver)
				}
			}
		})
	}
}

func TestCordumSeedGivesTheDocumentedDecisions(t *testing.T) {
	g := &Engine{Rules: mustParse(t, cordumSeed), Snapshot: testSnapshot}
	cases := []struct {
		code       string
		class      Class
		action     Action
		maxReplays int
		owner      string
		approver   string
		rule       string
	}{
		{"max_scheduling_retries", Transient, AutoReplay, 2, "", "", "rules.yaml:3"},
		{"schema_invalid", Poison, Quarantine, DefaultMaxReplays, "integration-team", "", "rules.yaml:8"},
		{"denied", Governance, RequireApproval, DefaultMaxReplays, "", "platform-governance", "rules.yaml:12"},
		{"unknown_commit_state", UnknownCommit, ManualReview, DefaultMaxReplays, "", "", "rules.yaml:16"},
		// Codes the seed does not name fall to their class defaults.
		{"timeout", Transient, AutoReplay, DefaultMaxReplays, "", "", "default:transient"},
		{"parse_error", Poison, Quarantine, DefaultMaxReplays, "", "", "default:poison"},
	}
	for _, c := range cases {
		d := decide(g, newEntry(c.code, ""), LedgerView{})
		if d.Class != c.class || d.Action != c.action || d.Rule != c.rule {
			t.Errorf("%s: class %s action %s rule %s, want %s %s %s", c.code, d.Class, d.Action, d.Rule, c.class, c.action, c.rule)
		}
		if d.MaxReplays != c.maxReplays || d.Owner != c.owner || d.ApproverGroup != c.approver {
			t.Errorf("%s: max_replays %d owner %q approver_group %q, want %d %q %q",
				c.code, d.MaxReplays, d.Owner, d.ApproverGroup, c.maxReplays, c.owner, c.approver)
		}
		if d.Backoff != DefaultBackoff() {
			t.Errorf("%s: backoff %+v, want the default %+v", c.code, d.Backoff, DefaultBackoff())
		}
	}
	// max_replays 2 of the first rule: the third replay needs a person.
	e := newEntry("max_scheduling_retries", "")
	if d := decide(g, e, LedgerView{State: StateDecided, Replays: 1}); d.Action != AutoReplay {
		t.Errorf("after 1 replay: %s, want auto_replay", d.Action)
	}
	if d := decide(g, e, LedgerView{State: StateDecided, Replays: 2}); d.Action != ManualReview || !hasReason(d, "max_replays reached (2 of 2)") {
		t.Errorf("after 2 replays: %s %q, want manual_review with max_replays reached", d.Action, d.Reasons)
	}
}

func TestBundledRulesLoad(t *testing.T) {
	path := filepath.Join("..", "..", "rules.yaml")
	r, data, err := LoadRules(path)
	if err != nil {
		t.Fatalf("the bundled rules.yaml does not load:\n%v", err)
	}
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(onDisk) {
		t.Error("LoadRules did not return the file's exact text")
	}
	if len(r.DLQRules) == 0 {
		t.Fatal("the bundled rules have no dlq_rules")
	}
	// What the file's comments promise.
	g := &Engine{Rules: r, Snapshot: testSnapshot}
	pay := decide(g, newEntry("timeout", "", topic("payments.card.charge")), LedgerView{})
	if pay.Rule != "payments-need-approval" || pay.Action != RequireApproval || pay.ApproverGroup != "payments-oncall" {
		t.Errorf("payments entry: rule %s action %s approver_group %s", pay.Rule, pay.Action, pay.ApproverGroup)
	}
	plain := decide(g, newEntry("timeout", ""), LedgerView{})
	if plain.Action != AutoReplay || plain.Owner != "platform-oncall" || plain.MaxReplays != 3 {
		t.Errorf("transient entry: action %s owner %s max_replays %d", plain.Action, plain.Owner, plain.MaxReplays)
	}
	if d := decide(g, newEntry("", "read: ECONNRESET"), LedgerView{}); d.Class != Transient {
		t.Errorf("the file's econnreset pattern: class %s", d.Class)
	}
	if d := decide(g, newEntry("UPSTREAM_503", ""), LedgerView{}); d.Class != Transient {
		t.Errorf("the file's upstream_503 code: class %s", d.Class)
	}
}

func TestLoadRulesMissingFile(t *testing.T) {
	_, _, err := LoadRules(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "read rules") {
		t.Fatalf("want a wrapped fs.ErrNotExist saying what was read, got %v", err)
	}
}

func TestBackoffForms(t *testing.T) {
	r := mustParse(t, `version: v1
defaults:
  backoff:
    strategy: exponential
    initial: 500ms
    max: 1m
    multiplier: 3
dlq_rules:
  - name: scalar
    match: {reason_code: timeout}
    action: auto_replay
    backoff: constant
  - name: partial
    match: {reason_code: no_workers}
    action: auto_replay
    backoff: {initial: 2s}
  - name: none
    match: {reason_code: rate_limited}
    action: auto_replay
`)
	g := &Engine{Rules: r}
	cases := []struct {
		code string
		want Backoff
	}{
		// A strategy name changes the strategy and keeps the defaults' intervals.
		{"timeout", Backoff{Strategy: BackoffConstant, Initial: 500 * time.Millisecond, Max: time.Minute, Multiplier: 3}},
		// A mapping overrides only what it sets.
		{"no_workers", Backoff{Strategy: BackoffExponential, Initial: 2 * time.Second, Max: time.Minute, Multiplier: 3}},
		{"rate_limited", Backoff{Strategy: BackoffExponential, Initial: 500 * time.Millisecond, Max: time.Minute, Multiplier: 3}},
	}
	for _, c := range cases {
		if d := decide(g, newEntry(c.code, ""), LedgerView{}); d.Backoff != c.want {
			t.Errorf("%s: backoff %+v, want %+v", c.code, d.Backoff, c.want)
		}
	}
}

func TestDefaultsApplyWhenTheFileSetsNone(t *testing.T) {
	d := decide(&Engine{Rules: mustParse(t, "version: v1\n")}, newEntry("timeout", ""), LedgerView{})
	if d.MaxReplays != DefaultMaxReplays || d.Backoff != DefaultBackoff() || d.Owner != "" || d.ApproverGroup != "" {
		t.Fatalf("max_replays %d backoff %+v owner %q approver_group %q", d.MaxReplays, d.Backoff, d.Owner, d.ApproverGroup)
	}
	want := Backoff{Strategy: BackoffExponentialJitter, Initial: time.Second, Max: 30 * time.Second, Multiplier: 2}
	if DefaultBackoff() != want {
		t.Fatalf("DefaultBackoff() = %+v, want %+v", DefaultBackoff(), want)
	}
}

func TestDefaultsAndRuleOverrides(t *testing.T) {
	g := &Engine{Rules: mustParse(t, `version: v1
defaults:
  max_replays: 7
  owner: ops
  approver_group: oncall
  backoff: {initial: 2s}
dlq_rules:
  - match: {reason_code: timeout}
    action: auto_replay
    max_replays: 1
    owner: mail-team
    backoff: {strategy: constant, initial: 5s}
  - match: {reason_code: no_workers}
    action: require_approval
    approver_group: infra
  - match: {reason_code: rate_limited}
    action: auto_replay
    max_replays: 0
`)}
	cases := []struct {
		code               string
		maxReplays         int
		owner, approver    string
		strategy           string
		initial, maxPeriod time.Duration
	}{
		{"timeout", 1, "mail-team", "oncall", BackoffConstant, 5 * time.Second, 30 * time.Second},
		{"no_workers", 7, "ops", "infra", BackoffExponentialJitter, 2 * time.Second, 30 * time.Second},
		{"rate_limited", 0, "ops", "oncall", BackoffExponentialJitter, 2 * time.Second, 30 * time.Second},
		{"denied", 7, "ops", "oncall", BackoffExponentialJitter, 2 * time.Second, 30 * time.Second}, // no rule: defaults
	}
	for _, c := range cases {
		d := decide(g, newEntry(c.code, ""), LedgerView{})
		if d.MaxReplays != c.maxReplays || d.Owner != c.owner || d.ApproverGroup != c.approver {
			t.Errorf("%s: max_replays %d owner %q approver_group %q, want %d %q %q",
				c.code, d.MaxReplays, d.Owner, d.ApproverGroup, c.maxReplays, c.owner, c.approver)
		}
		if d.Backoff.Strategy != c.strategy || d.Backoff.Initial != c.initial || d.Backoff.Max != c.maxPeriod || d.Backoff.Multiplier != 2 {
			t.Errorf("%s: backoff %+v", c.code, d.Backoff)
		}
	}
	// max_replays: 0 means no automatic replay at all.
	if d := decide(g, newEntry("rate_limited", ""), LedgerView{}); d.Action != ManualReview || !hasReason(d, "max_replays reached (0 of 0)") {
		t.Errorf("max_replays 0: %s %q, want manual_review", d.Action, d.Reasons)
	}
}

func ptr[T any](v T) *T { return &v }

// An entry without a topic is matched by topic-less rules only.
func TestEntryWithoutTopic(t *testing.T) {
	g := &Engine{Rules: mustParse(t, "version: v1\ndlq_rules:\n  - name: tools\n    match: {topic: \"tool.**\"}\n    action: quarantine\n")}
	if d := decide(g, newEntry("timeout", "", func(e *entry.Entry) { e.Topic = "" }), LedgerView{}); d.Rule != "default:transient" {
		t.Fatalf("rule %s", d.Rule)
	}
}
