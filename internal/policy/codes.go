package policy

import (
	"fmt"

	"github.com/replayctl/replayctl/internal/connector/registry"
	"github.com/replayctl/replayctl/internal/triage"
)

// TriageCodes is every connector's reason codes as triage takes them.
func TriageCodes() []triage.Code {
	cs := registry.Codes()
	out := make([]triage.Code, len(cs))
	for i, c := range cs {
		out[i] = triage.Code(c)
	}
	return out
}

// Every connector's reason codes are merged into the triage taxonomy
// before any rules are parsed in a program that builds engines
// (LoadEngine, EngineFromSnapshot), so a decision and its re-run by
// `audit replay-decision` see the same taxonomy. The codes are sorted:
// the taxonomy never depends on the order connectors are listed in.
// The connectors' source kinds and native target keys are registered
// with them, so that rules naming them parse.
func init() {
	if err := triage.RegisterCodes(TriageCodes()); err != nil {
		panic(fmt.Sprintf("policy: a connector's reason codes: %v", err))
	}
	triage.RegisterSystems(registry.Kinds(), registry.NativeKinds())
}
