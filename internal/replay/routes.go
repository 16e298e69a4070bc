package replay

import (
	"context"
	"os"

	"github.com/replayctl/replayctl/internal/connector/registry"
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
	kind, nt := t.Native()
	if nt == nil {
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
