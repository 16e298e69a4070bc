package triage

import (
	"fmt"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
)

func TestFirstMatchWins(t *testing.T) {
	both := func(first, second string) string {
		return fmt.Sprintf(`version: v1
dlq_rules:
  - name: %s
    match: {reason_code: timeout}
    action: quarantine
  - name: %s
    match: {class: transient}
    action: require_approval
`, first, second)
	}
	e := newEntry("timeout", "")
	if d := decide(newEngine(t, both("a", "b"), nil), e, LedgerView{}); d.Rule != "a" || d.Action != Quarantine {
		t.Errorf("rule %s action %s, want the first rule a with quarantine", d.Rule, d.Action)
	}
	// Swap what the rules match: the other rule is now first and wins.
	swapped := `version: v1
dlq_rules:
  - name: b
    match: {class: transient}
    action: require_approval
  - name: a
    match: {reason_code: timeout}
    action: quarantine
`
	if d := decide(newEngine(t, swapped, nil), e, LedgerView{}); d.Rule != "b" || d.Action != RequireApproval {
		t.Errorf("rule %s action %s, want the first rule b with require_approval", d.Rule, d.Action)
	}
	// A later rule still applies when the earlier one does not match.
	if d := decide(newEngine(t, both("a", "b"), nil), newEntry("no_workers", ""), LedgerView{}); d.Rule != "b" {
		t.Errorf("rule %s, want b", d.Rule)
	}
}

func TestUnnamedRuleIsNamedByItsLine(t *testing.T) {
	g := newEngine(t, `version: v1
dlq_rules:
  - match: {reason_code: denied}
    action: quarantine

  - match:
      reason_code: timeout
    action: quarantine
`, nil)
	if d := decide(g, newEntry("timeout", ""), LedgerView{}); d.Rule != "rules.yaml:6" {
		t.Errorf("rule id %q, want rules.yaml:6 (file and line of the rule)", d.Rule)
	}
	if d := decide(g, newEntry("denied", ""), LedgerView{}); d.Rule != "rules.yaml:3" {
		t.Errorf("rule id %q, want rules.yaml:3", d.Rule)
	}
}

// TestMatchConditions checks each condition of a match on its own: the
// rule "r" must match exactly the entries marked match.
func TestMatchConditions(t *testing.T) {
	cases := []struct {
		name  string
		match string // the flow mapping after "match: "
		code  string // the entry's reason code ("" keeps timeout)
		mod   func(*entry.Entry)
		hit   bool // whether rule r matches
	}{
		{"reason_code string", "{reason_code: timeout}", "timeout", nil, true},
		{"reason_code string, entry upper case", "{reason_code: timeout}", "TIMEOUT", nil, true},
		{"reason_code string, rule upper case", "{reason_code: TIMEOUT}", "timeout", nil, true},
		{"reason_code string, other code", "{reason_code: timeout}", "no_workers", nil, false},
		{"reason_code list, first", "{reason_code: [rate_limited, NO_WORKERS]}", "rate_limited", nil, true},
		{"reason_code list, second", "{reason_code: [rate_limited, NO_WORKERS]}", "no_workers", nil, true},
		{"reason_code list, neither", "{reason_code: [rate_limited, NO_WORKERS]}", "timeout", nil, false},
		{"reason_code of an entry with none", "{reason_code: timeout}", "-", nil, false},

		{"class string", "{class: transient}", "timeout", nil, true},
		{"class string, other class", "{class: poison}", "timeout", nil, false},
		{"class list", "{class: [poison, governance]}", "denied", nil, true},
		{"class list, upper case", "{class: [POISON, Transient]}", "timeout", nil, true},
		{"class from a message", "{class: governance}", "-", func(e *entry.Entry) { e.Message = "403 Forbidden" }, true},
		{"class of an unrecognised entry", "{class: unknown_commit}", "mystery", nil, true},

		{"topic **, one segment below", `{topic: "payments.**"}`, "", topic("payments.charge"), true},
		{"topic **, many segments below", `{topic: "payments.**"}`, "", topic("payments.card.eu.charge"), true},
		{"topic **, the prefix alone", `{topic: "payments.**"}`, "", topic("payments"), false},
		{"topic **, a longer first segment", `{topic: "payments.**"}`, "", topic("paymentsx.charge"), false},
		{"topic **, elsewhere in the topic", `{topic: "payments.**"}`, "", topic("tool.payments.charge"), false},
		{"topic *, one segment", `{topic: "tool.*.create"}`, "", topic("tool.jira.create"), true},
		{"topic *, not across dots", `{topic: "tool.*.create"}`, "", topic("tool.github.pr.create"), false},
		{"topic *, another verb", `{topic: "tool.*.create"}`, "", topic("tool.jira.delete"), false},
		{"topic * alone, one segment", `{topic: "*"}`, "", topic("orders"), true},
		{"topic * alone, not two", `{topic: "*"}`, "", topic("orders.created"), false},
		{"topic literal", `{topic: orders.created}`, "", topic("orders.created"), true},
		{"topic literal, case matters", `{topic: orders.created}`, "", topic("Orders.Created"), false},
		{"topic list, second", `{topic: ["billing.*", "orders.*"]}`, "", topic("orders.created"), true},
		{"topic list, neither", `{topic: ["billing.*", "orders.*"]}`, "", topic("users.created"), false},

		{"source", "{source: nexora}", "", source("nexora"), true},
		{"source, other", "{source: nexora}", "", source("cordum"), false},
		{"source list", "{source: [prodigy, jsonl]}", "", source("jsonl"), true},
		{"source list, neither", "{source: [prodigy, jsonl]}", "", source("cordum-redis"), false},

		{"min_attempts, below", "{min_attempts: 5}", "", attempts(4), false},
		{"min_attempts, at", "{min_attempts: 5}", "", attempts(5), true},
		{"min_attempts, above", "{min_attempts: 5}", "", attempts(6), true},
		{"max_attempts, below", "{max_attempts: 5}", "", attempts(4), true},
		{"max_attempts, at", "{max_attempts: 5}", "", attempts(5), true},
		{"max_attempts, above", "{max_attempts: 5}", "", attempts(6), false},
		{"max_attempts 0, no attempts", "{max_attempts: 0}", "", attempts(0), true},
		{"both bounds, inside", "{min_attempts: 2, max_attempts: 4}", "", attempts(3), true},
		{"both bounds, below", "{min_attempts: 2, max_attempts: 4}", "", attempts(1), false},
		{"both bounds, above", "{min_attempts: 2, max_attempts: 4}", "", attempts(5), false},

		{"label", "{labels: {team: payments}}", "", labels("team", "payments"), true},
		{"label among others", "{labels: {team: payments}}", "", labels("risk", "high", "team", "payments"), true},
		{"label missing", "{labels: {team: payments}}", "", labels("risk", "high"), false},
		{"label, no labels", "{labels: {team: payments}}", "", nil, false},
		{"label, other value", "{labels: {team: payments}}", "", labels("team", "growth"), false},
		{"label value is case-sensitive", "{labels: {team: payments}}", "", labels("team", "Payments"), false},
		{"labels, all hold", "{labels: {team: payments, risk: high}}", "", labels("team", "payments", "risk", "high"), true},
		{"labels, one fails", "{labels: {team: payments, risk: high}}", "", labels("team", "payments", "risk", "low"), false},
		{"label with an empty value", `{labels: {team: ""}}`, "", labels("team", ""), true},
		{"label with an empty value, missing", `{labels: {team: ""}}`, "", nil, false},

		{"empty match holds for every entry", "{}", "mystery", nil, true},
		{"every condition must hold", `{reason_code: timeout, class: transient, topic: "tool.**", source: cordum, min_attempts: 1, labels: {team: a}}`,
			"timeout", labels("team", "a"), true},
		{"every condition must hold, one fails", `{reason_code: timeout, class: transient, topic: "tool.**", source: cordum, min_attempts: 1, labels: {team: a}}`,
			"timeout", labels("team", "b"), false},
		{"every condition must hold, the source fails", `{reason_code: timeout, topic: "tool.**", source: prodigy}`,
			"timeout", nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newEngine(t, "version: v1\ndlq_rules:\n  - name: r\n    match: "+c.match+"\n    action: manual_review\n", nil)
			code := c.code
			switch code {
			case "":
				code = "timeout"
			case "-":
				code = ""
			}
			var mods []func(*entry.Entry)
			if c.mod != nil {
				mods = append(mods, c.mod)
			}
			d := decide(g, newEntry(code, "", mods...), LedgerView{})
			if got := d.Rule == "r"; got != c.hit {
				t.Errorf("match %s on %+v: rule %s, want matched=%v", c.match, newEntry(code, "", mods...), d.Rule, c.hit)
			}
		})
	}
}

func TestRuleReasonCodeMatchIgnoresSurroundingSpace(t *testing.T) {
	g := newEngine(t, cordumSeed, nil)
	for _, code := range []string{"max_scheduling_retries", " max_scheduling_retries ", "\tMAX_SCHEDULING_RETRIES\n"} {
		d := decide(g, newEntry(code, ""), LedgerView{})
		if d.Rule != "rules.yaml:3" || d.MaxReplays != 2 {
			t.Errorf("reason code %q (recorded as %q): rule %s max_replays %d, want the first seed rule with max_replays 2",
				code, d.ReasonCode, d.Rule, d.MaxReplays)
		}
	}
}

func TestClassDefaultsWhenNoRuleMatches(t *testing.T) {
	// Rules exist, but none matches any of these entries.
	g := newEngine(t, `version: v1
dlq_rules:
  - match: {topic: "never.**"}
    action: auto_replay
  - match: {source: nexora, class: [transient, poison, governance, unknown_commit]}
    action: auto_replay
`, nil)
	cases := []struct {
		code  string
		class Class
		want  Action
	}{
		{"timeout", Transient, AutoReplay},
		{"schema_invalid", Poison, Quarantine},
		{"denied", Governance, RequireApproval},
		{"merge_conflict", UnknownCommit, ManualReview},
	}
	for _, c := range cases {
		for name, g := range map[string]*Engine{"no rules": newEngine(t, "version: v1\n", nil), "no rule matches": g} {
			d := decide(g, newEntry(c.code, ""), LedgerView{})
			if d.Class != c.class || d.Rule != "default:"+string(c.class) || d.ProposedAction != c.want || d.Action != c.want {
				t.Errorf("%s: %s: class %s rule %s proposed %s action %s, want %s default:%s %s",
					name, c.code, d.Class, d.Rule, d.ProposedAction, d.Action, c.class, c.class, c.want)
			}
			if !hasReason(d, fmt.Sprintf("no rule matched: %s default is %s", c.class, c.want)) {
				t.Errorf("%s: %s: reasons %q do not say the default applied", name, c.code, d.Reasons)
			}
		}
	}
}

func TestTargetFor(t *testing.T) {
	r := mustParse(t, `version: v1
targets:
  - name: github-tools
    match: {topic: "tool.github.**"}
    http: {url: "http://localhost:9000/replay", probe: "http://localhost:9000/committed", timeout: 10s}
  - name: prodigy
    match: {source: prodigy}
    exec: {command: [prodigy, run-item]}
  - match: {topic: "tool.*.create", source: [cordum, nexora]}
    http: {url: "https://tools.example/replay"}
`)
	cases := []struct {
		e    *entry.Entry
		want string
	}{
		{newEntry("timeout", "", topic("tool.github.pr.create")), "github-tools"},
		{newEntry("timeout", "", topic("tool.github.pr.create"), source("prodigy")), "github-tools"}, // first match wins
		{newEntry("timeout", "", topic("anything"), source("prodigy")), "prodigy"},
		{newEntry("timeout", "", topic("tool.jira.create"), source("nexora")), "targets line 9"},
		{newEntry("timeout", "", topic("tool.jira.create"), source("jsonl")), ""},
		{newEntry("timeout", "", topic("orders.created")), ""},
	}
	for _, c := range cases {
		got := ""
		if tg := r.TargetFor(c.e); tg != nil {
			got = tg.TargetName()
		}
		if got != c.want {
			t.Errorf("%s from %s: target %q, want %q", c.e.Topic, c.e.Source, got, c.want)
		}
	}
	gh := r.TargetFor(newEntry("timeout", "", topic("tool.github.x")))
	if gh.HTTP == nil || gh.HTTP.Timeout.Seconds() != 10 || gh.HTTP.Probe != "http://localhost:9000/committed" {
		t.Errorf("github-tools target decoded as %+v", gh.HTTP)
	}
	if p := r.TargetFor(newEntry("timeout", "", source("prodigy"), topic("x"))); p.Exec == nil || len(p.Exec.Command) != 2 {
		t.Errorf("prodigy target decoded as %+v", p.Exec)
	}
}

func topic(s string) func(*entry.Entry)  { return func(e *entry.Entry) { e.Topic = s } }
func source(s string) func(*entry.Entry) { return func(e *entry.Entry) { e.Source = s } }
func attempts(n int) func(*entry.Entry)  { return func(e *entry.Entry) { e.Attempts = n } }

func labels(kv ...string) func(*entry.Entry) {
	return func(e *entry.Entry) {
		e.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			e.Labels[kv[i]] = kv[i+1]
		}
	}
}
