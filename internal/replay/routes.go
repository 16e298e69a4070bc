package replay

import (
	"context"
	"os"
	"strings"

	"github.com/replayctl/replayctl/internal/connector/registry"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/triage"
)

// Credentials for the systems replayctl replays through (see registry).
type Credentials = registry.Credentials

// CredentialsFromEnv reads the credentials with getenv (os.Getenv).
func CredentialsFromEnv(getenv func(string) string) Credentials {
	return registry.CredentialsFromEnv(getenv)
}

// ParseTarget builds the route for a --target value: a system's own
// replay (registry.NativeTarget, SYSTEM:URL), or a plain http(s) URL (with
// probe, its compensating read).
func ParseTarget(spec, probe string, c Credentials) (*Route, error) {
	n, native, err := registry.NativeTarget(spec, 0, c)
	if err != nil {
		return nil, err
	}
	if native {
		return &Route{Name: spec, Dispatcher: n, Prober: n}, nil
	}
	h := NewHTTPTarget(spec, probe, 0, nil)
	rt := &Route{Name: spec, Dispatcher: h}
	if probe != "" {
		rt.Prober = h
	}
	return rt, nil
}

// nativeRoute builds a rules.yaml target that replays through a system's
// own endpoint (see registry.NativeTarget), or nil for other kinds.
// Credentials come from the environment.
func nativeRoute(t *triage.Target) Dispatcher {
	var (
		nt   *triage.NativeTarget
		kind string
	)
	switch {
	case t.Cordum != nil:
		nt, kind = t.Cordum, entry.KindCordum
	case t.Nexora != nil:
		nt, kind = t.Nexora, entry.KindNexora
	default:
		return nil
	}
	d, _, err := registry.NativeTarget(kind+":"+nt.URL, nt.Timeout, CredentialsFromEnv(os.Getenv))
	if err != nil {
		// Validation rejects bad URLs before here; fail every dispatch
		// rather than send anywhere else.
		return brokenTarget{err}
	}
	return d
}

type brokenTarget struct{ err error }

func (b brokenTarget) Dispatch(context.Context, Request) Result {
	return Result{Outcome: Failed, Detail: b.err.Error()}
}

// liveSource is a source that reads a running Cordum or Nexora (consumer
// side of source's live sources): it names the target that replays its
// entries through the system and how its entries' Origin starts.
type liveSource interface {
	NativeTarget() string
	OriginPrefix() string
}

// LiveRouter sends entries read from a live Cordum or Nexora source
// through that system's own replay endpoint, and everything else to Next.
// An explicit --target (Override) wins over it.
type LiveRouter struct {
	Next     Router
	Override bool
	live     []liveRoute
}

type liveRoute struct {
	prefix, kind string
	route        Route
}

// NewLiveRouter wraps next with a route per live source in srcs.
func NewLiveRouter(next Router, override bool, c Credentials, srcs ...any) (*LiveRouter, error) {
	r := &LiveRouter{Next: next, Override: override}
	for _, s := range srcs {
		ls, ok := s.(liveSource)
		if !ok {
			continue
		}
		rt, err := ParseTarget(ls.NativeTarget(), "", c)
		if err != nil {
			return nil, err
		}
		kind, _, _ := strings.Cut(ls.NativeTarget(), ":")
		r.live = append(r.live, liveRoute{prefix: ls.OriginPrefix(), kind: kind, route: *rt})
	}
	return r, nil
}

// Route implements Router.
func (r *LiveRouter) Route(e *entry.Entry) (Route, bool) {
	if !r.Override {
		for _, l := range r.live {
			if e.Source == l.kind && strings.HasPrefix(e.Origin, l.prefix) {
				return l.route, true
			}
		}
	}
	return r.Next.Route(e)
}
