package replay

import (
	"net/url"
	"strings"
	"sync"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
)

// OriginRouter routes a stored entry that was read from a live Cordum or
// Nexora source through that system's own replay endpoint, found from
// the entry's Origin (the page URL it was read from), and everything else
// to Next. LiveRouter does the same for the sources of a run; this one
// serves replays of stored entries (`dlq replay ID`, `approvals approve
// --replay-now`, bulk replays, the API), which have no source at hand.
// An explicit --target (Override) wins over it.
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
		if rt, ok := r.brokerRoute(e); ok {
			return rt, true
		}
		if spec, ok := liveSpec(e); ok {
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

// liveSpec is "cordum:BASE" or "nexora:BASE" for an entry read from a
// live source: its Origin is BASE + "/api/..." (source/live.go).
func liveSpec(e *entry.Entry) (string, bool) {
	if e.Source != entry.KindCordum && e.Source != entry.KindNexora {
		return "", false
	}
	u, err := url.Parse(e.Origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false
	}
	base, _, ok := strings.Cut(e.Origin, "/api/")
	if !ok {
		return "", false
	}
	return e.Source + ":" + base, true
}

// brokerRoute routes a stored entry of a broker connector (its Origin is
// the connector's own spec, "KIND:...", without credentials) through that
// connector, opened once per origin with credentials from the
// environment.
func (r *OriginRouter) brokerRoute(e *entry.Entry) (Route, bool) {
	if e.Source == "" || !strings.HasPrefix(e.Origin, e.Source+":") {
		return Route{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := "broker " + e.Origin
	rt, seen := r.routes[key]
	if !seen {
		if src, err := source.Parse(e.Origin); err == nil {
			if b, ok := src.(brokerSource); ok && b.Origin() == e.Origin {
				rt = &Route{Name: e.Origin, Dispatcher: replayDispatcher{b}}
			}
		}
		r.routes[key] = rt
	}
	if rt == nil {
		return Route{}, false
	}
	return *rt, true
}
