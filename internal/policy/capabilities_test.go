package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/triage"
)

// deniedCalls reach the network or the runtime: a policy using one must
// not compile.
var deniedCalls = []struct{ name, call string }{
	{"http.send", `http.send({"method": "GET", "url": "http://example.com"})`},
	{"net.lookup_ip_addr", `net.lookup_ip_addr("example.com")`},
	{"opa.runtime", `opa.runtime()`},
}

func TestDeniedBuiltinsDoNotCompile(t *testing.T) {
	for _, c := range deniedCalls {
		t.Run(c.name, func(t *testing.T) {
			// The call sits on line 6, inside a rule body.
			src := "package replayctl\n\n# reaches out\n\nx if {\n\tr := " + c.call + "\n\tr != null\n}\n\ndecision := {\"action\": input.proposed_action, \"reasons\": [sprintf(\"%v\", [x])]}\n"
			eng, err := New(context.Background(), []triage.SourceFile{{Name: "policies/net.rego", Text: src}}, 0)
			if eng != nil {
				t.Fatal("an engine was built from a policy using " + c.name)
			}
			ps := configProblems(t, err)
			if ps[0].File != "policies/net.rego" || ps[0].Line != 6 || !strings.Contains(ps[0].Msg, "undefined function "+c.name) {
				t.Errorf("problems %+v, want policies/net.rego:6 naming %s", ps, c.name)
			}
			if !strings.Contains(err.Error(), "policies/net.rego:6: ") {
				t.Errorf("error text %q does not show file:line", err)
			}
			// A test calling it is refused the same way.
			test := triage.SourceFile{Name: "net_test.rego", Text: "package net_test\n\ntest_reach if {\n\t" + c.call + "\n}\n"}
			p, _ := bundled(t)
			_, err = RunTests(context.Background(), append(p, test))
			ps = configProblems(t, err)
			if ps[0].File != "net_test.rego" || ps[0].Line != 4 || !strings.Contains(ps[0].Msg, c.name) {
				t.Errorf("RunTests problems %+v, want net_test.rego:4 naming %s", ps, c.name)
			}
		})
	}
}

func TestCapabilities(t *testing.T) {
	have := map[string]bool{}
	for _, b := range Capabilities().Builtins {
		have[b.Name] = true
	}
	for _, c := range deniedCalls {
		if have[c.name] {
			t.Errorf("%s is still in the capabilities", c.name)
		}
	}
	// What policies need stays.
	for _, name := range []string{"startswith", "lower", "sprintf", "count", "object.union", "json.marshal", "regex.match", "glob.match"} {
		if !have[name] {
			t.Errorf("%s is missing from the capabilities", name)
		}
	}
	// Each call gets its own copy: removing builtins does not leak.
	a := Capabilities()
	a.Builtins = a.Builtins[:0]
	if len(Capabilities().Builtins) == 0 {
		t.Error("Capabilities returned shared state")
	}
}

func TestNondeterministicBuiltinsDoNotCompile(t *testing.T) {
	for _, call := range []string{"time.now_ns()", `rand.intn("x", 100)`, `uuid.rfc4122("x")`} {
		src := "package replayctl\n\nx := " + call + "\n\ndecision := {\"action\": input.proposed_action, \"reasons\": [sprintf(\"%v\", [x])]}\n"
		_, err := New(context.Background(), []triage.SourceFile{{Name: "clock.rego", Text: src}}, 0)
		if ps := configProblems(t, err); ps[0].File != "clock.rego" || ps[0].Line != 3 {
			t.Errorf("%s: %+v", call, ps)
		}
	}
}
