package triage

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
)

// FuzzParseRules: whatever the bytes, ParseRules does not panic, and
// either returns usable rules or a *ConfigError whose every problem names
// the file. The returned rules must decide without panicking, and parsing
// the same bytes twice reports the same problems.
func FuzzParseRules(f *testing.F) {
	bundled, err := os.ReadFile("../../rules.yaml")
	if err != nil {
		f.Fatal(err)
	}
	seeds := []string{
		string(bundled),
		cordumSeed,
		cordumSeedCompact,
		"version: v1\n",
		"",
		"{}",
		"- x",
		"version: v1\ndlq_rules: [\n",
		"version: v1\ndlq_rules:\n\t- action: x\n",
		"version: v1\ncolour: blue\ndlq_rules:\n  - match: {topc: x, class: flaky}\n    action: replay\n    max_replays: many\n",
		"version: v1\ndlq_rules:\n  - match: {topic: '[bad'}\n    action: quarantine\n    backoff: {initial: 10s, max: 1s}\n",
		"version: v1\ndlq_rules:\n  - match: {topic: '**', labels: {a: b}, min_attempts: 1, max_attempts: 0}\n    action: quarantine\n",
		"version: v1\npatterns:\n  - {regex: '(', class: transient}\n  - {contains: x, regex: y, class: nope}\ntaxonomy: {flaky: [a], poison: b}\n",
		"version: v1\ntargets:\n  - {name: a, http: {url: ftp://x, hdr: 1}, exec: {command: []}}\n  - {name: a}\n",
		"r: &a {version: v1}\nversion: v1\ndlq_rules:\n  - &r {action: quarantine}\n  - *r\n",
		"version: v1\ndefaults: &d {max_replays: -1}\nx: *d\n",
		"version: v1\nversion: v2\n",
		"version: [v1]\ndefaults: 3\ntaxonomy: [a]\npatterns: {}\ntargets: x\n",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	probe := []*entry.Entry{
		newEntry("timeout", ""),
		newEntry("", "x y z", topic("a.b.c"), labels("a", "b"), attempts(0)),
		newEntry("mystery", "", source("nexora"), topic("")),
	}
	f.Fuzz(func(t *testing.T, in string) {
		r, err := ParseRules("fuzz.yaml", []byte(in))
		if err == nil {
			if r == nil {
				t.Fatal("no rules and no error")
			}
			g := &Engine{Rules: r}
			for _, e := range probe {
				if d := decide(g, e, LedgerView{}); d.Action == "" || d.EvidenceHash == "" {
					t.Fatalf("incomplete decision from parsed rules: %+v", d)
				}
				_ = r.TargetFor(e)
			}
			return
		}
		if r != nil {
			t.Fatal("rules returned along with an error")
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) == 0 {
			t.Fatalf("error is not a *ConfigError with problems: %T %v", err, err)
		}
		for _, p := range ce.Problems {
			if p.File != "fuzz.yaml" || p.Msg == "" || p.Line < 0 {
				t.Fatalf("problem without its file, message or a sane line: %+v", p)
			}
		}
		_, err2 := ParseRules("fuzz.yaml", []byte(in))
		var ce2 *ConfigError
		if !errors.As(err2, &ce2) || !slices.Equal(sortedProblems(ce), sortedProblems(ce2)) {
			t.Fatalf("a second parse reports other problems:\n%v\n---\n%v", err, err2)
		}
	})
}

func sortedProblems(ce *ConfigError) []string {
	out := make([]string, len(ce.Problems))
	for i, p := range ce.Problems {
		out[i] = p.String()
	}
	slices.Sort(out)
	return out
}
