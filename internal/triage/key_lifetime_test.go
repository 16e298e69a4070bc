package triage

import (
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
)

const keyLifetimeRules = `version: v1
dlq_rules:
  - name: transient
    match: {class: transient}
    action: auto_replay
targets:
  - name: payments
    match: {topic: "pay.**"}
    key_lifetime: 24h
    http: {url: "http://payments.example/replay"}
  - name: forever
    match: {topic: "**"}
    http: {url: "http://other.example/replay"}
`

// TestKeyLifetimeGuard: an entry older than its target's key_lifetime,
// counted from its first dispatch or else its first failure, needs a
// person; the time is the view's (injected), never the wall clock.
func TestKeyLifetimeGuard(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	g := newEngine(t, keyLifetimeRules, nil)
	g.Now = func() time.Time { return now }
	pay := func(e *entry.Entry) { e.Topic = "pay.charge" }
	failed := func(ago time.Duration) func(*entry.Entry) {
		return func(e *entry.Entry) { e.FirstFailure = now.Add(-ago) }
	}
	cases := []struct {
		name   string
		e      *entry.Entry
		view   LedgerView
		want   Action
		reason string
	}{
		{"fresh failure", newEntry("timeout", "", pay, failed(2*time.Hour)), LedgerView{}, AutoReplay, ""},
		{"old failure", newEntry("timeout", "", pay, failed(25*time.Hour)), LedgerView{}, RequireApproval, "first failed"},
		{"old first dispatch, fresh failure", newEntry("timeout", "", pay, failed(time.Hour)),
			LedgerView{State: StateDecided, Replays: 1, FirstDispatch: now.Add(-30 * time.Hour)}, RequireApproval, "first dispatched"},
		{"fresh first dispatch, old failure", newEntry("timeout", "", pay, failed(40*time.Hour)),
			LedgerView{State: StateDecided, Replays: 1, FirstDispatch: now.Add(-time.Hour)}, AutoReplay, ""},
		{"history gives the first failure", newEntry("timeout", "", pay, func(e *entry.Entry) {
			e.History = []entry.Failure{{Time: now.Add(-3 * time.Hour)}, {Time: now.Add(-48 * time.Hour)}}
		}), LedgerView{}, RequireApproval, "first failed"},
		{"age unknown", newEntry("timeout", "", pay), LedgerView{}, RequireApproval, "age is unknown"},
		{"target without key_lifetime", newEntry("timeout", "", failed(1000*time.Hour)), LedgerView{}, AutoReplay, ""},
		{"already stricter stays", newEntry("no_such_code", "", pay, failed(48*time.Hour)), LedgerView{}, ManualReview, ""},
		{"approved lifts it", newEntry("timeout", "", pay, failed(48*time.Hour)), LedgerView{Approved: true}, AutoReplay, "key_lifetime 24h of target payments exceeded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := decide(g, c.e, c.view)
			if d.Action != c.want {
				t.Fatalf("action %s, want %s; reasons %q", d.Action, c.want, d.Reasons)
			}
			if c.reason != "" && !hasReason(d, c.reason) {
				t.Errorf("reasons %q lack %q", d.Reasons, c.reason)
			}
			if c.reason == "" && hasReason(d, KeyLifetimeReason) {
				t.Errorf("reasons %q name the key lifetime", d.Reasons)
			}
			if !d.Ledger.At.Equal(now) {
				t.Errorf("recorded decision time %v, want %v", d.Ledger.At, now)
			}
		})
	}
}

// TestKeyLifetimeUsesTheRecordedTime: a re-run of a recorded decision
// judges the age at the time it recorded, not at the engine's clock; an
// engine without a clock and a view without a time leave the guard out.
func TestKeyLifetimeUsesTheRecordedTime(t *testing.T) {
	then := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := newEngine(t, keyLifetimeRules, nil)
	g.Now = func() time.Time { return then.Add(100 * 24 * time.Hour) }
	e := newEntry("timeout", "", func(e *entry.Entry) { e.Topic = "pay.x"; e.FirstFailure = then.Add(-time.Hour) })
	if d := decide(g, e, LedgerView{At: then}); d.Action != AutoReplay {
		t.Fatalf("re-run at the recorded time: %s %q, want auto_replay", d.Action, d.Reasons)
	}
	if d := decide(g, e, LedgerView{}); d.Action != RequireApproval {
		t.Fatalf("decided now: %s, want require_approval", d.Action)
	}
	g.Now = nil
	if d := decide(g, e, LedgerView{}); d.Action != AutoReplay {
		t.Fatalf("no clock: %s, want auto_replay", d.Action)
	}
}

// TestKeyLifetimePolicyOnlyTightens: a policy answering auto_replay does
// not undo the guard.
func TestKeyLifetimePolicyOnlyTightens(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	p := policyReturning(AutoReplay)
	g := newEngine(t, keyLifetimeRules, p)
	g.Now = func() time.Time { return now }
	e := newEntry("timeout", "", func(e *entry.Entry) { e.Topic = "pay.x"; e.FirstFailure = now.Add(-72 * time.Hour) })
	d := decide(g, e, LedgerView{})
	if d.Action != RequireApproval {
		t.Fatalf("action %s, want require_approval; %q", d.Action, d.Reasons)
	}
	if got := p.seen[0].ProposedAction; got != RequireApproval {
		t.Errorf("policy saw proposal %s, want require_approval", got)
	}
}

func TestKeyLifetimeValidation(t *testing.T) {
	_, err := ParseRules("rules.yaml", []byte(`version: v1
targets:
  - name: a
    key_lifetime: -1h
    http: {url: "http://a.example/"}
  - name: b
    key_lifetime: soon
    http: {url: "http://b.example/"}
`))
	ps := configProblems(t, err, "rules.yaml")
	if _, ok := findProblem(ps, 4, "targets[0].key_lifetime", "negative"); !ok {
		t.Errorf("no problem for the negative lifetime at line 4:\n%s", problemList(ps))
	}
	if _, ok := findProblem(ps, 7, "key_lifetime", "duration"); !ok {
		t.Errorf("no problem for the bad duration at line 7:\n%s", problemList(ps))
	}
}

func TestRetentionConfig(t *testing.T) {
	r := mustParse(t, "version: v1\nretention:\n  closed: 30d\n")
	if got := r.Retention.ClosedFor(); got != 30*24*time.Hour {
		t.Fatalf("closed %v", got)
	}
	if got := mustParse(t, "version: v1\n").Retention.ClosedFor(); got != DefaultClosedRetention {
		t.Fatalf("default %v", got)
	}
	_, err := ParseRules("rules.yaml", []byte("version: v1\nretention:\n  closed: 5m\n  open: 3d\n"))
	ps := configProblems(t, err, "rules.yaml")
	if _, ok := findProblem(ps, 3, "retention.closed", "too short"); !ok {
		t.Errorf("no problem for the short retention at line 3:\n%s", problemList(ps))
	}
	if _, ok := findProblem(ps, 4, "unknown field \"open\""); !ok {
		t.Errorf("no problem for the unknown key at line 4:\n%s", problemList(ps))
	}
	if _, err := ParseRules("rules.yaml", []byte("version: v1\nretention:\n  closed: soon\n")); err == nil {
		t.Error("a period that is not one was accepted")
	}
}
