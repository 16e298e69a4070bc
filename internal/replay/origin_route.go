package replay

import (
	"context"
	"sync"

	"github.com/replayctl/replayctl/internal/connector/registry"
	"github.com/replayctl/replayctl/internal/source"

	"github.com/replayctl/replayctl/internal/entry"
)

// OriginRouter routes an entry read from a running system (a live source,
// a message broker) through that system's own replay, found from the
// entry's Origin (the page URL it was read from, registry.OriginTarget;
// a broker's queue or topic, registry.Finder.BrokerFor), and everything
// else to Next. It serves a run's entries and replays of stored entries
// (`dlq replay ID`, `approvals approve --replay-now`, bulk replays, the
// API) alike, which have no source at hand. An explicit --target
// (Override) wins over it.
type OriginRouter struct {
	Next     Router
	Override bool
	creds    Credentials
	brokers  *registry.Finder

	mu     sync.Mutex
	routes map[string]*Route // by "kind:base"; nil when the base is unusable
}

// NewOriginRouter wraps next. The broker connectors among srcs (a run's
// sources) replay their own entries: they hold the credentials their spec
// gave, which a stored entry's Origin does not; a broker entry of another
// queue or topic opens its connector again from its Origin, with
// credentials from c.
func NewOriginRouter(next Router, override bool, c Credentials, srcs ...source.Source) *OriginRouter {
	f := &registry.Finder{Creds: c}
	f.Add(srcs...)
	return &OriginRouter{Next: next, Override: override, creds: c, brokers: f, routes: map[string]*Route{}}
}

// Route implements Router.
func (r *OriginRouter) Route(e *entry.Entry) (Route, bool) {
	if !r.Override {
		if b, ok := r.brokers.BrokerFor(e); ok {
			// A broker replays back where the message came from (issue 28),
			// and a route, its breaker and its --rate, is per destination.
			return Route{Name: b.Destination(e), Dispatcher: replayDispatcher{b}}, true
		}
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

// replayDispatcher dispatches through a connector's own Replay.
type replayDispatcher struct{ b registry.Broker }

func (d replayDispatcher) Dispatch(ctx context.Context, r Request) Result { return d.b.Replay(ctx, r) }
