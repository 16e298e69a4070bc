package triage

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
)

// fakePolicy is a hand-written Policy for decision tests: evaluate answers,
// and every input it was asked about is kept for assertions.
type fakePolicy struct {
	evaluate func(in *PolicyInput) (PolicyResult, error)

	mu   sync.Mutex
	seen []PolicyInput
}

var _ Policy = (*fakePolicy)(nil)

func (f *fakePolicy) Evaluate(_ context.Context, in *PolicyInput) (PolicyResult, error) {
	f.mu.Lock()
	f.seen = append(f.seen, *in)
	f.mu.Unlock()
	return f.evaluate(in)
}

func (f *fakePolicy) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seen)
}

// policyReturning answers every proposal with action a.
func policyReturning(a Action, reasons ...string) *fakePolicy {
	return &fakePolicy{evaluate: func(*PolicyInput) (PolicyResult, error) {
		return PolicyResult{Action: a, Reasons: reasons}, nil
	}}
}

// policyFailing answers every proposal with err.
func policyFailing(err error) *fakePolicy {
	return &fakePolicy{evaluate: func(*PolicyInput) (PolicyResult, error) { return PolicyResult{}, err }}
}

// testSnapshot is the snapshot id engines built by newEngine carry.
const testSnapshot = "sha256:snap"

// mustParse parses rules text named rules.yaml or fails the test.
func mustParse(t testing.TB, text string) *Rules {
	t.Helper()
	r, err := ParseRules("rules.yaml", []byte(text))
	if err != nil {
		t.Fatalf("parse rules:\n%s\n%v", text, err)
	}
	return r
}

// newEngine builds an engine from rules text; p may be nil.
func newEngine(t testing.TB, rules string, p Policy) *Engine {
	t.Helper()
	return &Engine{Rules: mustParse(t, rules), Policy: p, Snapshot: testSnapshot}
}

// newEntry is a decodable Cordum entry with a payload and a derived key;
// mods adjust it.
func newEntry(code, msg string, mods ...func(*entry.Entry)) *entry.Entry {
	e := &entry.Entry{
		ID: "job_1", Source: "cordum", Topic: "tool.github.pr.create",
		ReasonCode: code, Message: msg, Attempts: 3, Payload: []byte(`{"a":1}`),
	}
	for _, m := range mods {
		m(e)
	}
	e.EnsureKey()
	return e
}

func decide(g *Engine, e *entry.Entry, view LedgerView) Decision {
	return g.Decide(context.Background(), e, view)
}

// hasReason reports whether some reason of d contains sub.
func hasReason(d Decision, sub string) bool {
	for _, r := range d.Reasons {
		if strings.Contains(r, sub) {
			return true
		}
	}
	return false
}

// configProblems asserts err is a *ConfigError with at least one problem,
// every one of them naming file, and returns the problems.
func configProblems(t testing.TB, err error, file string) []Problem {
	t.Helper()
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *ConfigError, got %T: %v", err, err)
	}
	if len(ce.Problems) == 0 {
		t.Fatal("a *ConfigError without problems")
	}
	for _, p := range ce.Problems {
		if p.File != file {
			t.Errorf("problem names file %q, want %q: %+v", p.File, file, p)
		}
		if p.Msg == "" {
			t.Errorf("problem without a message: %+v", p)
		}
	}
	return ce.Problems
}

// findProblem returns the problem at line whose message contains every
// one of subs.
func findProblem(ps []Problem, line int, subs ...string) (Problem, bool) {
next:
	for _, p := range ps {
		if p.Line != line {
			continue
		}
		for _, s := range subs {
			if !strings.Contains(p.Msg, s) {
				continue next
			}
		}
		return p, true
	}
	return Problem{}, false
}

func problemList(ps []Problem) string { return (&ConfigError{Problems: ps}).Error() }
