package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/triage"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{
		"b.rego":        "package replayctl\n",
		"a.rego":        "package replayctl\n",
		"a_test.rego":   "package a_test\n",
		"sub/c.rego":    "package replayctl.sub\n",
		"data.json":     `{"limits": {"max": 2}}`,
		"sub/data.yaml": "teams: [growth]\n",
	})
	p, tests, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantP := []triage.SourceFile{
		{Name: filepath.Join(dir, "a.rego"), Text: "package replayctl\n"},
		{Name: filepath.Join(dir, "b.rego"), Text: "package replayctl\n"},
		{Name: filepath.Join(dir, "sub", "c.rego"), Text: "package replayctl.sub\n"},
		// OPA merges data files under their directory's path.
		{Name: filepath.Join(dir, DataFile), Text: `{"limits":{"max":2},"sub":{"teams":["growth"]}}`},
	}
	wantT := []triage.SourceFile{{Name: filepath.Join(dir, "a_test.rego"), Text: "package a_test\n"}}
	if !reflect.DeepEqual(p, wantP) || !reflect.DeepEqual(tests, wantT) {
		t.Fatalf("policies %+v tests %+v", p, tests)
	}

	// Issue 14: a file the loader cannot use was skipped silently.
	junk := t.TempDir()
	writeFiles(t, junk, map[string]string{
		"a.rego":     "package replayctl\n",
		"notes.md":   "not a policy",
		"c.rego.bak": "not a policy either",
	})
	_, _, err = ReadDir(junk)
	ps := configProblems(t, err)
	if len(ps) != 2 || ps[0].File != filepath.Join(junk, "c.rego.bak") || ps[1].File != filepath.Join(junk, "notes.md") ||
		!strings.Contains(ps[0].Msg, "not a policy (*.rego)") {
		t.Fatalf("want both unusable files named: %+v", ps)
	}

	empty := t.TempDir()
	writeFiles(t, empty, map[string]string{"only_test.rego": "package x_test\n"})
	_, _, err = ReadDir(empty)
	ps = configProblems(t, err)
	if ps[0].File != empty || !strings.Contains(ps[0].Msg, "no policy files (*.rego) found") || !strings.Contains(ps[0].Msg, "--policies") {
		t.Fatalf("%+v", ps)
	}
}

// Issue 14: a data.json next to the policies and policies in
// subdirectories were ignored by the engine while `opa test` used them, so
// live decisions were laxer than the tested policy. Here the data and a
// subdirectory's rule make the decision stricter; the engine, `policy test`
// and a stored snapshot must all see them.
func TestDataAndSubdirectoriesAreLoaded(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "extra"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{
		"decision.rego": `package replayctl

default decision := {"action": "auto_replay", "reasons": []}

decision := {"action": "manual_review", "reasons": ["frozen topic"]} if {
	some t in data.frozen_topics
	input.entry.topic == t
}

decision := {"action": "quarantine", "reasons": ["blocked team"]} if data.replayctl.extra.blocked[input.entry.labels.team]
`,
		"extra/blocked.rego": "package replayctl.extra\n\nblocked contains \"growth\"\n",
		"data.yaml":          "frozen_topics: [payments.refund]\n",
		"decision_test.rego": `package replayctl_test

import data.replayctl

test_frozen if replayctl.decision.action == "manual_review" with input as {"entry": {"topic": "payments.refund", "labels": {}}}
`,
	})
	ctx := context.Background()
	rulesPath := filepath.Join(t.TempDir(), "rules.yaml")
	writeFiles(t, filepath.Dir(rulesPath), map[string]string{"rules.yaml": "version: v1\n"})
	_, snap, err := LoadEngine(ctx, rulesPath, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := New(ctx, mustPolicies(t, dir), 0)
	if err != nil {
		t.Fatal(err)
	}
	frozen := input("payments.refund", nil, triage.Transient, triage.AutoReplay)
	blocked := input("tool.a", map[string]string{"team": "growth"}, triage.Transient, triage.AutoReplay)
	for what, e := range map[string]*Engine{"engine": eng, "snapshot": mustSnapshotPolicy(t, snap)} {
		if r, err := e.Evaluate(ctx, frozen); err != nil || r.Action != triage.ManualReview {
			t.Errorf("%s: data.yaml ignored: %+v %v", what, r, err)
		}
		if r, err := e.Evaluate(ctx, blocked); err != nil || r.Action != triage.Quarantine {
			t.Errorf("%s: extra/blocked.rego ignored: %+v %v", what, r, err)
		}
	}
	p, tests, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	results, err := RunTests(ctx, append(p, tests...))
	if err != nil || len(results) != 1 || !results[0].Pass {
		t.Fatalf("policy test with data: %+v %v", results, err)
	}
}

func mustPolicies(t *testing.T, dir string) []triage.SourceFile {
	t.Helper()
	p, _, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustSnapshotPolicy(t *testing.T, snap triage.Snapshot) *Engine {
	t.Helper()
	g, err := EngineFromSnapshot(context.Background(), snap, 0)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := g.Policy.(*Engine)
	if !ok {
		t.Fatalf("snapshot policy is %T", g.Policy)
	}
	return e
}

func TestLoadEngine(t *testing.T) {
	ctx := context.Background()
	g, snap, err := LoadEngine(ctx, "../../rules.yaml", bundledDir, 0)
	if err != nil {
		t.Fatal(err)
	}
	rulesText, _ := os.ReadFile("../../rules.yaml")
	p, _ := bundled(t)
	for i := range p {
		p[i].Name = filepath.Base(p[i].Name)
	}
	want := triage.NewSnapshot(triage.SourceFile{Name: "rules.yaml", Text: string(rulesText)}, p)
	if !reflect.DeepEqual(snap, want) || g.Snapshot != want.ID {
		t.Fatalf("snapshot %+v engine %q, want %+v (tests are not part of it)", snap.ID, g.Snapshot, want.ID)
	}
	if g.Rules == nil || g.Policy == nil {
		t.Fatal("engine without rules or policy")
	}
}

// Issue 14 (c): the snapshot id hashed the rules path as typed, so
// "rules.yaml", "./rules.yaml" and an absolute path gave three snapshots
// and an approval recorded under one was refused as stale under another.
func TestSnapshotIDIndependentOfHowPathsAreTyped(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "policies"), 0o755); err != nil {
		t.Fatal(err)
	}
	rules, _ := os.ReadFile("../../rules.yaml")
	pol, _ := os.ReadFile(filepath.Join(bundledDir, "replayctl.rego"))
	writeFiles(t, root, map[string]string{"rules.yaml": string(rules), "policies/replayctl.rego": string(pol)})
	t.Chdir(root)
	ids := map[string]string{}
	for _, paths := range [][2]string{
		{"rules.yaml", "policies"},
		{"./rules.yaml", "./policies/"},
		{filepath.Join(root, "rules.yaml"), filepath.Join(root, "policies")},
		{"policies/../rules.yaml", "policies/."},
	} {
		_, snap, err := LoadEngine(context.Background(), paths[0], paths[1], 0)
		if err != nil {
			t.Fatal(err)
		}
		ids[snap.ID] = ids[snap.ID] + fmt.Sprint(paths) + " "
		if _, err := EngineFromSnapshot(context.Background(), snap, 0); err != nil {
			t.Fatalf("%v: the snapshot does not rebuild: %v", paths, err)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("the same files typed differently gave %d snapshot ids: %v", len(ids), ids)
	}
}

func TestLoadEngineReportsEveryProblemTogether(t *testing.T) {
	ctx := context.Background()
	t.Run("missing rules, no policies", func(t *testing.T) {
		dir := t.TempDir()
		_, _, err := LoadEngine(ctx, filepath.Join(dir, "missing.yaml"), dir, 0)
		ps := configProblems(t, err)
		if len(ps) != 2 || !strings.Contains(ps[0].Msg, "cannot read rules") || !strings.Contains(ps[1].Msg, "no policy files") {
			t.Fatalf("want both the rules and the policy problem: %+v", ps)
		}
	})
	t.Run("bad rules and a bad policy", func(t *testing.T) {
		dir := t.TempDir()
		rules := filepath.Join(t.TempDir(), "rules.yaml")
		writeFiles(t, filepath.Dir(rules), map[string]string{"rules.yaml": "version: v1\ndlq_rules:\n  - action: replay\n"})
		writeFiles(t, dir, map[string]string{
			"p.rego": "package replayctl\n\ndecision := http.send({})\n",
		})
		_, _, err := LoadEngine(ctx, rules, dir, 0)
		ps := configProblems(t, err)
		var sawRules, sawPolicy bool
		for _, p := range ps {
			sawRules = sawRules || (p.File == rules && p.Line == 3 && strings.Contains(p.Msg, `unknown action "replay"`))
			sawPolicy = sawPolicy || (p.File == filepath.Join(dir, "p.rego") && p.Line == 3 && strings.Contains(p.Msg, "http.send"))
		}
		if !sawRules || !sawPolicy {
			t.Fatalf("want the rules problem and the policy problem, got:\n%v", err)
		}
	})
}

func TestEngineFromSnapshot(t *testing.T) {
	ctx := context.Background()
	g, snap, err := LoadEngine(ctx, "../../rules.yaml", bundledDir, 0)
	if err != nil {
		t.Fatal(err)
	}
	again, err := EngineFromSnapshot(ctx, snap, 0)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(code, topic string, labels map[string]string) *entry.Entry {
		e := &entry.Entry{ID: "j-" + code, Source: "cordum", Topic: topic, ReasonCode: code, Labels: labels, Payload: []byte(`{"x":1}`)}
		e.EnsureKey()
		return e
	}
	for _, e := range []*entry.Entry{
		mk("timeout", "tool.a.b", nil),
		mk("timeout", "tool.a.b", map[string]string{"risk": "high"}),
		mk("denied", "payments.x", nil),
		mk("mystery", "x", nil),
	} {
		a := g.Decide(ctx, e, triage.LedgerView{})
		b := again.Decide(ctx, e, triage.LedgerView{})
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: the snapshot's engine decides differently:\n%+v\n%+v", e.ReasonCode, a, b)
		}
	}

	// Edited text under the old id is refused.
	tampered := snap
	tampered.Policies = []triage.SourceFile{{Name: snap.Policies[0].Name, Text: snap.Policies[0].Text + "\n# edited\n"}}
	if _, err := EngineFromSnapshot(ctx, tampered, 0); err == nil || !strings.Contains(err.Error(), "does not hash to its id") {
		t.Errorf("a tampered snapshot: %v", err)
	}
	// Broken text comes back as a *triage.ConfigError.
	broken := triage.NewSnapshot(triage.SourceFile{Name: "r.yaml", Text: "version: v9\n"}, snap.Policies)
	_, err = EngineFromSnapshot(ctx, broken, 0)
	if ps := configProblems(t, err); ps[0].File != "r.yaml" || ps[0].Line != 1 {
		t.Errorf("%+v", ps)
	}
	brokenPolicy := triage.NewSnapshot(snap.Rules, []triage.SourceFile{{Name: "p.rego", Text: "package replayctl\n\nx := opa.runtime()\n"}})
	_, err = EngineFromSnapshot(ctx, brokenPolicy, 0)
	if ps := configProblems(t, err); ps[0].File != "p.rego" || ps[0].Line != 3 {
		t.Errorf("%+v", ps)
	}
}

func TestConcurrentEvaluation(t *testing.T) {
	p, _ := bundled(t)
	eng := mustNew(t, 0, p...)
	type job struct {
		in   *triage.PolicyInput
		want triage.Action
	}
	jobs := []job{
		{input("tool.email.send", nil, triage.Transient, triage.AutoReplay), triage.AutoReplay},
		{input("tool.email.send", map[string]string{"risk": "high"}, triage.Transient, triage.AutoReplay), triage.RequireApproval},
		{input("payments.charge", nil, triage.Transient, triage.AutoReplay), triage.RequireApproval},
		{input("tool.email.send", nil, triage.UnknownCommit, triage.AutoReplay), triage.ManualReview},
		{input("tool.email.send", nil, triage.Poison, triage.Quarantine), triage.Quarantine},
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				j := jobs[(w+i)%len(jobs)]
				res, err := eng.Evaluate(context.Background(), j.in)
				if err != nil || res.Action != j.want {
					t.Errorf("goroutine %d: %s %v, want %s", w, res.Action, err, j.want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestConcurrentDecisions(t *testing.T) {
	g, _, err := LoadEngine(context.Background(), "../../rules.yaml", bundledDir, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			labels := map[string]string{}
			want := triage.AutoReplay
			if w%2 == 0 {
				labels["risk"], want = "high", triage.RequireApproval
			}
			e := &entry.Entry{ID: "j", Source: "cordum", Topic: "tool.a.b", ReasonCode: "timeout", Labels: labels}
			e.EnsureKey()
			for range 50 {
				if d := g.Decide(context.Background(), e, triage.LedgerView{}); d.Action != want || d.PolicyError != "" {
					t.Errorf("goroutine %d: %s (%s), want %s", w, d.Action, d.PolicyError, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// Bundles as .tar.gz are loaded as OPA loads them: their modules and data
// take part in decisions like files on disk.
func TestTarballBundleIsLoaded(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, text := range map[string]string{
		"/frozen.rego": "package replayctl\n\ndefault decision := {\"action\": \"auto_replay\", \"reasons\": []}\n\n" +
			"decision := {\"action\": \"manual_review\", \"reasons\": [\"frozen\"]} if input.entry.topic in data.frozen\n",
		"/data.json": `{"frozen": ["payments.refund"]}`,
	} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(text))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bundle.tar.gz"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	eng, err := New(context.Background(), mustPolicies(t, dir), 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := eng.Evaluate(context.Background(), input("payments.refund", nil, triage.Transient, triage.AutoReplay))
	if err != nil || r.Action != triage.ManualReview {
		t.Fatalf("bundle ignored: %+v %v", r, err)
	}
}
