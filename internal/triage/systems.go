package triage

import (
	"slices"
	"strings"
	"sync"
)

// systems are the source kinds rules may match, and the systems with a
// replay path of their own, whose name is a rules.yaml target key: each
// connector's, registered as its codes are (RegisterSystems), so that
// triage names no system.
var systems struct {
	sync.Mutex
	sources, native []string
}

// RegisterSystems adds source kinds (a rule's match.source, a target's
// match.source) and native target keys (a target replaying through the
// system's own endpoint, as --target KIND:URL) for every Rules parsed
// afterwards, in the order given (the order errors list them in).
// internal/policy registers the connector registry's. Registering a kind
// twice is harmless.
func RegisterSystems(sources, native []string) {
	systems.Lock()
	defer systems.Unlock()
	for _, s := range sources {
		if !slices.Contains(systems.sources, s) {
			systems.sources = append(systems.sources, s)
		}
	}
	for _, s := range native {
		if !slices.Contains(systems.native, s) {
			systems.native = append(systems.native, s)
		}
	}
}

// registeredSystems is a copy of what was registered.
func registeredSystems() (sources, native []string) {
	systems.Lock()
	defer systems.Unlock()
	return slices.Clone(systems.sources), slices.Clone(systems.native)
}

func knownSource(s string) bool {
	sources, _ := registeredSystems()
	return slices.Contains(sources, s)
}

// oneOf words a list as "a, b or c".
func oneOf(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
