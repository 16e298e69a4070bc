package triage

import (
	"testing"

	"github.com/replayctl/replayctl/internal/connector/registry"
)

// The tests classify the codes the systems write: they get them the way
// a program does (internal/policy registers every connector's codes),
// through RegisterCodes.
func init() {
	cs := registry.Codes()
	out := make([]Code, len(cs))
	for i, c := range cs {
		out[i] = Code(c)
	}
	if err := RegisterCodes(out); err != nil {
		panic(err)
	}
	RegisterSystems(registry.Kinds(), registry.NativeKinds())
}

// keepRegistered restores the registered codes when the test ends, so
// that the codes a test registers do not reach the others.
func keepRegistered(t *testing.T) {
	registered.Lock()
	saved := append([]registeredCode(nil), registered.codes...)
	registered.Unlock()
	t.Cleanup(func() {
		registered.Lock()
		registered.codes = saved
		registered.Unlock()
	})
}

func TestRegisterCodesRefusesAnUnknownClass(t *testing.T) {
	keepRegistered(t)
	if err := RegisterCodes([]Code{{Code: "x_code", Class: "maybe", Where: "test"}}); err == nil {
		t.Error("RegisterCodes accepted class \"maybe\"")
	}
	if err := RegisterCodes([]Code{{Code: " ", Class: "poison", Where: "test"}}); err == nil {
		t.Error("RegisterCodes accepted an empty code")
	}
	if _, ok := builtinTaxonomy()["x_code"]; ok {
		t.Error("a refused code entered the taxonomy")
	}
}

// TestRegisteredCodesTakeTheStricterClassAndYieldToTheFile: two systems
// that class one code differently give it the stricter class, whatever
// the order they registered in; an unrecognised code stays out; the
// rules file's taxonomy still overrides a registered code.
func TestRegisteredCodesTakeTheStricterClassAndYieldToTheFile(t *testing.T) {
	keepRegistered(t)
	registered.Lock()
	saved := append([]registeredCode(nil), registered.codes...)
	registered.Unlock()
	for _, order := range [][]Code{
		{{Code: "zz_shared", Class: "transient"}, {Code: "zz_shared", Class: "governance"}},
		{{Code: "ZZ_shared", Class: "governance"}, {Code: "zz_shared ", Class: "transient"}},
	} {
		for _, c := range order {
			if err := RegisterCodes([]Code{c}); err != nil {
				t.Fatal(err)
			}
		}
		if got := builtinTaxonomy()["zz_shared"]; got != Governance {
			t.Errorf("zz_shared: %s, want governance (the stricter)", got)
		}
		registered.Lock()
		registered.codes = append([]registeredCode(nil), saved...)
		registered.Unlock()
	}
	if err := RegisterCodes([]Code{{Code: "zz_shared", Class: "governance"}}); err != nil {
		t.Fatal(err)
	}
	if err := RegisterCodes([]Code{{Code: "zz_listed_only", Class: "unrecognised"}}); err != nil {
		t.Fatal(err)
	}
	r := mustParse(t, "version: v1\ntaxonomy:\n  poison: [zz_shared]\n")
	if c := r.classify("zz_shared", ""); c.Class != Poison {
		t.Errorf("zz_shared with the file listing it as poison: %s (%s)", c.Class, c.Why)
	}
	if c := r.classify("zz_listed_only", ""); !c.Unrecognised {
		t.Errorf("zz_listed_only: %s, want unrecognised (%s)", c.Class, c.Why)
	}
}
