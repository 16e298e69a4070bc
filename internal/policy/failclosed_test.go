package policy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/triage"
)

// slowBody works through nine million pairs before it decides: far past
// any timeout the tests set, and it holds no memory while it works.
const slowBody = `never if {
	some i in numbers.range(1, 3000)
	some j in numbers.range(1, 3000)
	i * j < 0
}

decision := {"action": input.proposed_action} if not never
`

// TestFailClosed: every way a policy can fail to give a usable decision is
// an error from Evaluate, and through triage the entry goes to
// manual_review with the error recorded, never to auto_replay.
func TestFailClosed(t *testing.T) {
	cases := []struct {
		name      string
		body      string
		undefined bool   // errors.Is(err, ErrUndefined)
		has       string // in the error text
	}{
		// Undefined for the input.
		{"condition never holds", `decision := {"action": "auto_replay"} if input.class == "nothing"` + "\n", true, "must be defined for every input"},
		{"action undefined for the class", `decision := {"action": a} if a := {"poison": "quarantine"}[input.class]` + "\n", true, ""},
		{"no decision at all", "other := 1\n", true, ""},
		{"the rank misses the proposed action", `rank := {"quarantine": 3}

decision := {"action": a} if {
	a := input.proposed_action
	rank[a] >= 0
}
`, true, ""},

		// Defined, but not a decision.
		{"a string", `decision := "auto_replay"` + "\n", false, "policy returned string, want an object {action, reasons}"},
		{"a number", "decision := 42\n", false, "want an object"},
		{"a list", `decision := ["auto_replay"]` + "\n", false, "want an object"},
		{"null", "decision := null\n", false, "want an object"},
		{"a boolean", "decision := true\n", false, "want an object"},
		{"no action", `decision := {"reasons": []}` + "\n", false, "no string action"},
		{"action a number", `decision := {"action": 1}` + "\n", false, "no string action"},
		{"action null", `decision := {"action": null}` + "\n", false, "no string action"},
		{"unknown action", `decision := {"action": "replay_twice"}` + "\n", false, `unknown action "replay_twice"`},
		{"empty action", `decision := {"action": ""}` + "\n", false, `unknown action ""`},
		{"skip is not for policies", `decision := {"action": "skip"}` + "\n", false, `unknown action "skip"`},
		{"reasons a string", `decision := {"action": "auto_replay", "reasons": "x"}` + "\n", false, "reasons must be a list"},
		{"reasons an object", `decision := {"action": "auto_replay", "reasons": {"a": 1}}` + "\n", false, "reasons must be a list"},
		{"a reason not a string", `decision := {"action": "auto_replay", "reasons": ["ok", 1]}` + "\n", false, "reasons must be strings"},
		{"a reason an object", `decision := {"action": "auto_replay", "reasons": [{"why": "x"}]}` + "\n", false, "reasons must be strings"},

		// Runtime errors.
		{"conflicting complete rule values", `decision := {"action": "auto_replay"} if input.class == "transient"
decision := {"action": "quarantine"} if input.entry.source == "cordum"
`, false, "eval_conflict_error"},
		{"conflicting function values", `f(x) := "auto_replay" if x > 0
f(x) := "quarantine" if x > 1

decision := {"action": f(input.entry.attempts + 5)}
`, false, "eval_conflict_error"},
		{"division by zero", `n := 1 / input.ledger.replays

decision := {"action": input.proposed_action, "reasons": [sprintf("%v", [n])]}
`, false, "divide by zero"},
		{"strict builtin error", `decision := {"action": "auto_replay", "reasons": [sprintf("%d", [to_number("x")])]}` + "\n", false, "eval_builtin_error"},
		{"several values for one complete rule", `decision := {"action": "auto_replay", "reasons": [r]} if {
	some r in ["a", "b"]
}
`, false, "eval_conflict_error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := strings.ReplaceAll(c.name, " ", "_") + ".rego"
			eng := mustNew(t, 0, regoFile(file, c.body))
			_, err := eng.Evaluate(context.Background(), input("tool.x", nil, triage.Transient, triage.AutoReplay))
			if err == nil {
				t.Fatal("evaluation succeeded")
			}
			if errors.Is(err, ErrUndefined) != c.undefined {
				t.Errorf("errors.Is(err, ErrUndefined) = %v, want %v: %v", !c.undefined, c.undefined, err)
			}
			if !strings.Contains(err.Error(), c.has) {
				t.Errorf("error %q does not mention %q", err, c.has)
			}
			d := decideWith(t, eng)
			if d.Action != triage.ManualReview || d.PolicyError != err.Error() || d.PolicyAction != "" {
				t.Errorf("through triage: action %s policy action %q policy error %q, want manual_review with %q", d.Action, d.PolicyAction, d.PolicyError, err)
			}
		})
	}
}

func TestRuntimeErrorsNameTheirPlace(t *testing.T) {
	eng := mustNew(t, 0, regoFile("div.rego", "n := 1 / input.ledger.replays\n\ndecision := {\"action\": \"auto_replay\", \"reasons\": [sprintf(\"%v\", [n])]}\n"))
	_, err := eng.Evaluate(context.Background(), input("t", nil, triage.Transient, triage.AutoReplay))
	if err == nil || !strings.Contains(err.Error(), "div.rego:3:") || !strings.HasPrefix(err.Error(), "evaluate policy: ") {
		t.Fatalf("error %v, want it to say evaluate policy and div.rego:3", err)
	}
	// The same policy is fine when the input allows it: the error was the input's.
	in := input("t", nil, triage.Transient, triage.AutoReplay)
	in.Ledger.Replays = 2
	if res, err := eng.Evaluate(context.Background(), in); err != nil || res.Reasons[0] != "0.5" {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestTimeoutsFailClosed(t *testing.T) {
	slow := regoFile("slow.rego", slowBody)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	short, cancelShort := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelShort()
	cases := []struct {
		name    string
		timeout time.Duration
		ctx     context.Context
	}{
		{"engine timeout of a nanosecond", time.Nanosecond, context.Background()},
		{"engine timeout of a millisecond", time.Millisecond, context.Background()},
		{"context already cancelled", 0, cancelled},
		{"caller deadline shorter than the engine's", time.Minute, short},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eng := mustNew(t, c.timeout, slow)
			_, err := eng.Evaluate(c.ctx, input("t", nil, triage.Transient, triage.AutoReplay))
			if err == nil {
				t.Fatal("a policy running past its time limit succeeded")
			}
			if !strings.Contains(err.Error(), "cancel") {
				t.Errorf("error %q does not say the evaluation was cancelled", err)
			}
			rules, _ := triage.ParseRules("rules.yaml", []byte("version: v1\n"))
			g := &triage.Engine{Rules: rules, Policy: eng}
			e := input("t", nil, triage.Transient, triage.AutoReplay).Entry
			if d := g.Decide(c.ctx, e, triage.LedgerView{}); d.Action != triage.ManualReview || d.PolicyError == "" {
				t.Errorf("through triage: %s (policy error %q), want manual_review", d.Action, d.PolicyError)
			}
		})
	}
}

func TestZeroTimeoutMeansTheDefault(t *testing.T) {
	if DefaultTimeout <= 0 {
		t.Fatalf("DefaultTimeout %v", DefaultTimeout)
	}
	for _, timeout := range []time.Duration{0, -time.Second} {
		eng := mustNew(t, timeout, regoFile("p.rego", `decision := {"action": input.proposed_action}`+"\n"))
		if eng.timeout != DefaultTimeout {
			t.Errorf("New(..., %v): timeout %v, want %v", timeout, eng.timeout, DefaultTimeout)
		}
		if _, err := eng.Evaluate(context.Background(), input("t", nil, triage.Transient, triage.AutoReplay)); err != nil {
			t.Errorf("New(..., %v): %v", timeout, err)
		}
	}
}
