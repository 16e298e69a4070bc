package policy

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/triage"
)

// bundledDir is the policies/ directory replayctl ships.
var bundledDir = filepath.Join("..", "..", "policies")

// bundled reads the shipped policies and their tests.
func bundled(t testing.TB) (policies, tests []triage.SourceFile) {
	t.Helper()
	p, tt, err := ReadDir(bundledDir)
	if err != nil {
		t.Fatal(err)
	}
	return p, tt
}

// mustNew compiles files or fails the test.
func mustNew(t testing.TB, timeout time.Duration, files ...triage.SourceFile) *Engine {
	t.Helper()
	eng, err := New(context.Background(), files, timeout)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return eng
}

// regoFile is one policy file in package replayctl with body after the package line.
func regoFile(name, body string) triage.SourceFile {
	return triage.SourceFile{Name: name, Text: "package replayctl\n\n" + body}
}

// input is a proposal for an entry of the given topic, labels and class.
func input(topic string, labels map[string]string, class triage.Class, proposed triage.Action) *triage.PolicyInput {
	e := &entry.Entry{ID: "job_1", Source: "cordum", Topic: topic, ReasonCode: "timeout", Attempts: 3, Labels: labels}
	e.EnsureKey()
	return &triage.PolicyInput{Entry: e, Class: class, Rule: "default:" + string(class), ProposedAction: proposed, MaxReplays: 3}
}

// decideWith runs a transient entry (proposed auto_replay) through a
// triage engine using p, so a policy failure shows as the final action.
func decideWith(t testing.TB, p triage.Policy) triage.Decision {
	t.Helper()
	rules, err := triage.ParseRules("rules.yaml", []byte("version: v1\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := &triage.Engine{Rules: rules, Policy: p, Snapshot: "sha256:test"}
	e := &entry.Entry{ID: "job_1", Source: "cordum", Topic: "tool.email.send", ReasonCode: "timeout", Payload: []byte(`{}`)}
	e.EnsureKey()
	return g.Decide(context.Background(), e, triage.LedgerView{})
}

// configProblems asserts err is a *triage.ConfigError and returns its problems.
func configProblems(t testing.TB, err error) []triage.Problem {
	t.Helper()
	var ce *triage.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *triage.ConfigError, got %T: %v", err, err)
	}
	if len(ce.Problems) == 0 {
		t.Fatal("a *triage.ConfigError without problems")
	}
	return ce.Problems
}
