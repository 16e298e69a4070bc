package replay

import (
	"sync"

	"github.com/replayctl/replayctl/internal/connector/registry"

	"github.com/replayctl/replayctl/internal/entry"
)

// OriginRouter routes an entry read from a running system (a live source)
// through that system's own replay endpoint, found from the entry's Origin
// (the page URL it was read from; registry.OriginTarget), and everything
// else to Next. It serves a run's entries and replays of stored entries
// (`dlq replay ID`, `approvals approve --replay-now`, bulk replays, the
// API) alike, which have no source at hand. An explicit --target
// (Override) wins over it.
type OriginRouter struct {
	Next     Router
	Override bool
	creds    Credentials

	mu     sync.Mutex
	routes map[string]*Route // by "kind:base"; nil when the base is unusable
}

// NewOriginRouter wraps next.
func NewOriginRouter(next Router, override bool, c Credentials) *OriginRouter {
	return &OriginRouter{Next: next, Override: override, creds: c, routes: map[string]*Route{}}
}

// Route implements Router.
func (r *OriginRouter) Route(e *entry.Entry) (Route, bool) {
	if !r.Override {
		if spec, ok := registry.OriginTarget(e); ok {
			r.mu.Lock()
			rt, seen := r.routes[spec]
			if !seen {
				rt, _ = ParseTarget(spec, "", r.creds) // a bad base falls through to Next
				r.routes[spec] = rt
			}
			r.mu.Unlock()
			if rt != nil {
				return *rt, true
			}
		}
	}
	return r.Next.Route(e)
}
