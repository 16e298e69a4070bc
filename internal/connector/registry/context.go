package registry

import (
	"maps"

	"github.com/replayctl/replayctl/internal/connector/prodigy"
	"github.com/replayctl/replayctl/internal/entry"
)

// ReplayContext names an entry for a program that replays it (an exec
// target, connector/webhook): its ref, source, scope and origin, and what
// its system adds (a Prodigy item's job id, repository and item file).
// Keys with no value are left out.
func ReplayContext(e *entry.Entry) map[string]string {
	out := map[string]string{"entry_ref": e.Ref(), "source": e.Source}
	set := func(k, v string) {
		if v != "" {
			out[k] = v
		}
	}
	set("scope", e.Scope)
	set("origin", e.Origin)
	if e.Source == entry.KindProdigy {
		maps.Copy(out, prodigy.ReplayContext(e))
	}
	return out
}
