package triage

import (
	"regexp"
	"testing"
)

func TestNewSnapshot(t *testing.T) {
	rules := SourceFile{Name: "rules.yaml", Text: "version: v1\n"}
	pols := []SourceFile{
		{Name: "policies/a.rego", Text: "package replayctl\n"},
		{Name: "policies/b.rego", Text: "package replayctl\n\nx := 1\n"},
	}
	base := NewSnapshot(rules, pols)
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(base.ID) {
		t.Fatalf("snapshot id %q", base.ID)
	}
	if base.Rules != rules || len(base.Policies) != 2 || base.Policies[1] != pols[1] {
		t.Fatalf("the snapshot does not keep its files: %+v", base)
	}
	// Stable: the same files give the same id, built from fresh copies.
	again := NewSnapshot(SourceFile{Name: "rules.yaml", Text: "version: v1\n"}, append([]SourceFile(nil), pols...))
	if again.ID != base.ID {
		t.Fatal("the same files gave another id")
	}

	with := func(i int, f SourceFile) []SourceFile {
		out := append([]SourceFile(nil), pols...)
		out[i] = f
		return out
	}
	changed := map[string]Snapshot{
		"rules text":            NewSnapshot(SourceFile{Name: "rules.yaml", Text: "version: v1\n#\n"}, pols),
		"rules name":            NewSnapshot(SourceFile{Name: "other.yaml", Text: "version: v1\n"}, pols),
		"a policy's text":       NewSnapshot(rules, with(1, SourceFile{Name: "policies/b.rego", Text: "package replayctl\n\nx := 2\n"})),
		"a policy's name":       NewSnapshot(rules, with(0, SourceFile{Name: "policies/c.rego", Text: "package replayctl\n"})),
		"a policy removed":      NewSnapshot(rules, pols[:1]),
		"no policies":           NewSnapshot(rules, nil),
		"a policy added":        NewSnapshot(rules, append(append([]SourceFile(nil), pols...), SourceFile{Name: "policies/z.rego"})),
		"the policies' order":   NewSnapshot(rules, []SourceFile{pols[1], pols[0]}),
		"text moved into name":  NewSnapshot(SourceFile{Name: "rules.yamlversion: v1\n"}, pols),
		"text moved into rules": NewSnapshot(SourceFile{Name: "rules.yaml", Text: "version: v1\npackage replayctl\n"}, []SourceFile{{Name: "policies/a.rego"}, pols[1]}),
		"a file split in two":   NewSnapshot(SourceFile{Name: "rules.yaml", Text: "version: "}, []SourceFile{{Text: "v1\n"}, pols[0], pols[1]}),
	}
	seen := map[string]string{base.ID: "base"}
	for what, s := range changed {
		if prev, dup := seen[s.ID]; dup {
			t.Errorf("changing %s gives the same id as %s", what, prev)
		}
		seen[s.ID] = what
	}
}
