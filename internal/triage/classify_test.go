package triage

import (
	"strings"
	"testing"
)

// documentedTaxonomy is the table of taxonomy.go, written out so that a
// code silently dropped from the built-ins fails here.
var documentedTaxonomy = map[Class][]string{
	Transient: {"timeout", "dependency_unavailable", "no_workers", "max_scheduling_retries",
		"resource_exhausted", "rate_limited", "worktree_error",
		"pool_overloaded", "tenant_limit", "dispatch_failed", "schema_registry_unavailable",
		"job_status_timeout", "job_status_failed_retryable"},
	Poison: {"schema_invalid", "parse_error", "tool_contract_mismatch", "validation_failed",
		"commit_validation_failed", "schema_validation_failed", "schema_not_found", "unknown_topic",
		"no_pool_mapping", "job_status_failed_fatal"},
	Governance: {"denied", "approval_required", "policy_snapshot_mismatch", "permission_denied",
		"policy_denied", "policy_violation", "safety_denied", "safety_unknown", "approval_rejected",
		"redelivery_dlq_retry", "tier_limit_exceeded", "delegation.*",
		"job_status_denied", "job_status_cancelled"},
	UnknownCommit: {"partial_external_write", "unknown_commit_state", "merge_conflict", "command_failed",
		"output_quarantined", "output_quarantined_async", "max_retries_exceeded",
		"quarantine_failed", "quarantine_panic_failed", "job_status_succeeded", "job_status_completed"},
	// Generic codes: tested in TestGenericCodesDeferToStatusAndMessage.
	classGeneric: {"job_status_failed", "job_status_unspecified", "step_failed", "unexpected_error"},
}

func TestBuiltinTaxonomyMapsEveryCodeToItsClass(t *testing.T) {
	n := 0
	for _, codes := range documentedTaxonomy {
		n += len(codes)
	}
	if got := len(builtinTaxonomy()); got != n {
		t.Errorf("built-in taxonomy has %d codes, the documented table %d: keep them in step", got, n)
	}
	g := newEngine(t, "version: v1\n", nil)
	for class, codes := range documentedTaxonomy {
		if class == classGeneric {
			continue
		}
		for _, code := range codes {
			variants := []string{code, strings.ToUpper(code), " " + strings.ToUpper(code[:1]) + code[1:] + " ", "\t" + code + "\n"}
			for _, v := range variants {
				d := decide(g, newEntry(v, ""), LedgerView{})
				if d.Class != class || d.Unrecognised {
					t.Errorf("reason code %q: class %s (unrecognised %v), want %s", v, d.Class, d.Unrecognised, class)
				}
				if d.ReasonCode != code {
					t.Errorf("reason code %q recorded as %q, want it normalised to %q", v, d.ReasonCode, code)
				}
				if !hasReason(d, "reason code "+code+" is "+string(class)) {
					t.Errorf("reason code %q: reasons %q do not say why", v, d.Reasons)
				}
			}
		}
	}
}

func TestReasonCodeCaseInsensitive(t *testing.T) {
	g := newEngine(t, "version: v1\n", nil)
	for _, code := range []string{"timeout", "TIMEOUT", " Timeout ", "TimeOut", "\ttimeout"} {
		if d := decide(g, newEntry(code, ""), LedgerView{}); d.Class != Transient || d.Action != AutoReplay {
			t.Errorf("%q: %s/%s, want transient/auto_replay", code, d.Class, d.Action)
		}
	}
}

// builtinPatternCases: each built-in message pattern, with the class it gives.
var builtinPatternCases = []struct {
	pattern string
	class   Class
}{
	{"timeout", Transient},
	{"timed out", Transient},
	{"deadline exceeded", Transient},
	{"connection refused", Transient},
	{"unavailable", Transient},
	{"permission", Governance},
	{"access denied", Governance},
	{"forbidden", Governance},
	{"invalid json", Poison},
	{"parse error", Poison},
	{"schema", Poison},
}

func TestBuiltinMessagePatterns(t *testing.T) {
	if got := len(builtinPatterns()); got != len(builtinPatternCases) {
		t.Errorf("%d built-in patterns, %d tested: keep them in step", got, len(builtinPatternCases))
	}
	g := newEngine(t, "version: v1\n", nil)
	for _, c := range builtinPatternCases {
		msgs := []string{
			c.pattern,
			strings.ToUpper(c.pattern),
			"upstream said: " + strings.ToUpper(c.pattern[:1]) + c.pattern[1:] + " (after 3 tries)",
		}
		for _, msg := range msgs {
			// With no reason code, the pattern decides.
			d := decide(g, newEntry("", msg), LedgerView{})
			if d.Class != c.class || d.Unrecognised {
				t.Errorf("message %q: class %s (unrecognised %v), want %s", msg, d.Class, d.Unrecognised, c.class)
			}
			if !hasReason(d, "message matches contains "+c.pattern) {
				t.Errorf("message %q: reasons %q do not name the pattern", msg, d.Reasons)
			}
			if d.Action != DefaultAction(c.class) {
				t.Errorf("message %q: action %s, want the %s default %s", msg, d.Action, c.class, DefaultAction(c.class))
			}
			// With a code the taxonomy does not know, the entry stays
			// unrecognised (issue 27): a pattern may only make it stricter.
			d = decide(g, newEntry("brand_new_code", msg), LedgerView{})
			want, wantAction := UnknownCommit, ManualReview
			if classRank(c.class) > classRank(UnknownCommit) {
				want, wantAction = c.class, DefaultAction(c.class)
			}
			if d.Class != want || !d.Unrecognised || d.Action != wantAction {
				t.Errorf("unknown code, message %q: %s/%s (unrecognised %v), want %s/%s, unrecognised", msg, d.Class, d.Action, d.Unrecognised, want, wantAction)
			}
		}
	}
}

func TestBuiltinPatternsAreTriedInOrder(t *testing.T) {
	// Transient patterns come first, then governance, then poison.
	g := newEngine(t, "version: v1\n", nil)
	cases := []struct {
		msg  string
		want Class
	}{
		{"schema registry unavailable", Transient},
		{"permission check timed out", Transient},
		{"forbidden: schema owner only", Governance},
	}
	for _, c := range cases {
		if d := decide(g, newEntry("", c.msg), LedgerView{}); d.Class != c.want {
			t.Errorf("%q: %s, want %s", c.msg, d.Class, c.want)
		}
	}
}

func TestReasonCodeWinsOverMessage(t *testing.T) {
	// A message that, alone, would give a different class.
	otherMessage := map[Class]string{
		Transient:     "invalid json in body",
		Poison:        "request timed out",
		Governance:    "connection refused",
		UnknownCommit: "schema mismatch",
	}
	g := newEngine(t, "version: v1\npatterns:\n  - {contains: 'timed out', class: governance}\n", nil)
	for class, codes := range documentedTaxonomy {
		if class == classGeneric {
			continue
		}
		for _, code := range codes {
			d := decide(g, newEntry(code, otherMessage[class]), LedgerView{})
			if d.Class != class {
				t.Errorf("code %s with message %q: class %s, want %s from the code", code, otherMessage[class], d.Class, class)
			}
		}
	}
}

func TestUnrecognisedFailures(t *testing.T) {
	cases := []struct{ code, msg string }{
		{"", ""},
		{"weird_new_code", ""},
		{"", "something odd happened"},
		{"weird_new_code", "something odd happened"},
		{"  ", "   "},
	}
	// Rules that would replay an unknown_commit entry automatically, and a
	// policy that agrees: an unrecognised failure must still reach a person.
	lax := `version: v1
dlq_rules:
  - name: replay-unknown
    match: {class: unknown_commit}
    action: auto_replay
  - name: replay-everything
    action: auto_replay
`
	engines := map[string]*Engine{
		"no rules":                    newEngine(t, "version: v1\n", nil),
		"auto_replay rule":            newEngine(t, lax, nil),
		"auto_replay rule and policy": newEngine(t, lax, policyReturning(AutoReplay)),
	}
	for name, g := range engines {
		for _, c := range cases {
			d := decide(g, newEntry(c.code, c.msg), LedgerView{})
			if d.Class != UnknownCommit || !d.Unrecognised {
				t.Errorf("%s: %q/%q: class %s unrecognised %v, want unknown_commit and unrecognised", name, c.code, c.msg, d.Class, d.Unrecognised)
			}
			if Stricter(d.Action, ManualReview) != d.Action {
				t.Errorf("%s: %q/%q: action %s, want at least manual_review", name, c.code, c.msg, d.Action)
			}
			if !hasReason(d, "unrecognised") {
				t.Errorf("%s: %q/%q: reasons %q do not say it is unrecognised", name, c.code, c.msg, d.Reasons)
			}
		}
	}
	// The rule still matched and is recorded: the escalation is on top of it.
	d := decide(engines["auto_replay rule"], newEntry("weird_new_code", ""), LedgerView{})
	if d.Rule != "replay-unknown" || d.ProposedAction != AutoReplay || d.Action != ManualReview {
		t.Errorf("rule %s proposed %s action %s, want replay-unknown, auto_replay, manual_review", d.Rule, d.ProposedAction, d.Action)
	}
}

func TestRecognisedUnknownCommitIsNotUnrecognised(t *testing.T) {
	g := newEngine(t, "version: v1\n", nil)
	d := decide(g, newEntry("merge_conflict", ""), LedgerView{})
	if d.Class != UnknownCommit || d.Unrecognised || d.Action != ManualReview {
		t.Fatalf("merge_conflict: %s unrecognised %v action %s", d.Class, d.Unrecognised, d.Action)
	}
}

func TestFilePatternsAreTriedBeforeBuiltins(t *testing.T) {
	g := newEngine(t, `version: v1
patterns:
  - contains: "Gateway Timeout"
    class: poison
  - regex: '^E\d{3}: quota'
    class: governance
  - regex: "upstream returned 5[0-9][0-9]"
    class: transient
  - contains: "econnreset"
    class: transient
  - contains: "econn"
    class: poison
`, nil)
	cases := []struct {
		msg          string
		want         Class
		unrecognised bool
		why          string
	}{
		// The file's contains pattern beats the built-in "timeout".
		{"504 gateway timeout from edge", Poison, false, "contains Gateway Timeout"},
		// Regex, case-insensitive, anchored where the file anchors it.
		{"e429: quota exhausted", Governance, false, `regex ^E\d{3}: quota`},
		{"E429: QUOTA exhausted", Governance, false, `regex ^E\d{3}: quota`},
		{"Upstream Returned 503", Transient, false, "regex upstream returned 5[0-9][0-9]"},
		// Contains is case-insensitive; the first file pattern wins.
		{"read tcp: ECONNRESET", Transient, false, "contains econnreset"},
		{"ECONNABORTED", Poison, false, "contains econn"},
		// Nothing in the file matches: the built-ins still apply.
		{"plain timeout", Transient, false, "contains timeout"},
		{"the E429: quota came late", UnknownCommit, true, ""},
		{"upstream returned 404", UnknownCommit, true, ""},
	}
	for _, c := range cases {
		d := decide(g, newEntry("", c.msg), LedgerView{})
		if d.Class != c.want || d.Unrecognised != c.unrecognised {
			t.Errorf("%q: class %s (unrecognised %v), want %s (unrecognised %v)", c.msg, d.Class, d.Unrecognised, c.want, c.unrecognised)
		}
		if c.why != "" && !hasReason(d, "message matches "+c.why) {
			t.Errorf("%q: reasons %q, want the pattern %q named", c.msg, d.Reasons, c.why)
		}
	}
}

func TestTaxonomyFromTheFileExtendsAndOverrides(t *testing.T) {
	g := newEngine(t, `version: v1
taxonomy:
  transient: [upstream_503, Connection_Reset]
  Poison: [payload_too_large, timeout]
  governance: [" needs_owner "]
`, nil)
	cases := []struct {
		code string
		want Class
	}{
		{"upstream_503", Transient},
		{"CONNECTION_RESET", Transient}, // file codes are case-insensitive too
		{"payload_too_large", Poison},
		{"timeout", Poison},         // the file overrides the built-in class
		{"no_workers", Transient},   // built-ins the file does not name stay
		{"needs_owner", Governance}, // and file codes are trimmed
		{"denied", Governance},
	}
	for _, c := range cases {
		d := decide(g, newEntry(c.code, ""), LedgerView{})
		if d.Class != c.want || d.Unrecognised {
			t.Errorf("%s: %s (unrecognised %v), want %s", c.code, d.Class, d.Unrecognised, c.want)
		}
	}
	// The file's taxonomy belongs to that file: another engine keeps the built-in.
	if d := decide(newEngine(t, "version: v1\n", nil), newEntry("timeout", ""), LedgerView{}); d.Class != Transient {
		t.Errorf("an override leaked into the built-in taxonomy: timeout is %s", d.Class)
	}
}

func TestTaxonomyCodeUnderTwoClassesIsRejectedOrDeterministic(t *testing.T) {
	const text = "version: v1\ntaxonomy:\n  transient: [dup]\n  poison: [dup]\n"
	_, err := ParseRules("rules.yaml", []byte(text))
	if err == nil {
		seen := map[Class]bool{}
		for range 100 {
			r := mustParse(t, text)
			seen[r.classify("dup", "").Class] = true
		}
		if len(seen) > 1 {
			t.Fatalf("the same rules file classifies dup as %v on different parses", seen)
		}
		return
	}
	ps := configProblems(t, err, "rules.yaml")
	if _, ok := findProblem(ps, 2, "dup"); !ok {
		t.Fatalf("no problem naming the duplicated code: %s", problemList(ps))
	}
}

func BenchmarkClassify(b *testing.B) {
	r := mustParse(b, `version: v1
taxonomy:
  transient: [upstream_503]
patterns:
  - contains: econnreset
    class: transient
  - regex: "upstream returned 5[0-9][0-9]"
    class: transient
`)
	inputs := []struct{ code, msg string }{
		{"timeout", ""},
		{" SCHEMA_INVALID ", "ignored"},
		{"", "dial tcp 10.0.0.1:443: connection refused"},
		{"", "upstream returned 502 bad gateway"},
		{"mystery", "an error nothing recognises, in a message of ordinary length for a DLQ entry"},
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		in := inputs[i%len(inputs)]
		_ = r.classify(in.code, in.msg)
		i++
	}
}

// A Classification says why, for each branch: the reasons are what an
// operator reads.
func TestClassifyExplainsItself(t *testing.T) {
	r := mustParse(t, "version: v1\n")
	cases := []struct {
		code, msg, want string
	}{
		{"TIMEOUT", "", "reason code timeout is transient"},
		{"", "Forbidden", "message matches contains forbidden (governance)"},
		{"nope", "", "reason code nope is not in the taxonomy: unrecognised, never auto-replayed"},
		{"", "", "no reason code and no message pattern recognised: unrecognised, never auto-replayed"},
	}
	for _, c := range cases {
		if got := r.classify(c.code, c.msg).Why; got != c.want {
			t.Errorf("classify(%q, %q).Why = %q, want %q", c.code, c.msg, got, c.want)
		}
	}
}
