package replay

import (
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/registry"
	"github.com/replayctl/replayctl/internal/connector/webhook"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/triage"
)

// The types the runner shares with connectors live in internal/connector.
type (
	Outcome     = connector.Outcome
	Request     = connector.Request
	Result      = connector.Result
	Dispatcher  = connector.Dispatcher
	ProbeResult = connector.ProbeResult
	Prober      = connector.Prober
	EntryProber = connector.EntryProber
)

// Outcomes and probe results (see internal/connector).
const (
	Succeeded         = connector.Succeeded
	Failed            = connector.Failed
	Retry             = connector.Retry
	Unknown           = connector.Unknown
	HandledElsewhere  = connector.HandledElsewhere
	NotSent           = connector.NotSent
	ProbeCommitted    = connector.ProbeCommitted
	ProbeNotCommitted = connector.ProbeNotCommitted
	ProbeInconclusive = connector.ProbeInconclusive
)

// HTTPTarget and ExecTarget are the generic targets (connector/webhook).
type (
	HTTPTarget = webhook.HTTPTarget
	ExecTarget = webhook.ExecTarget
)

// ExitTempFail asks an exec target's runner for a retry.
const ExitTempFail = webhook.ExitTempFail

// NewHTTPTarget returns an HTTP target (see webhook.NewHTTPTarget).
func NewHTTPTarget(u, probe string, timeout time.Duration, headers map[string]string) *HTTPTarget {
	return webhook.NewHTTPTarget(u, probe, timeout, headers)
}

// Route is where one entry's replays go.
type Route struct {
	Name       string
	Dispatcher Dispatcher
	Prober     Prober // nil: no compensating read
}

// Router finds an entry's route; ok is false when no target is configured.
type Router interface {
	Route(e *entry.Entry) (Route, bool)
}

// RulesRouter routes by rules.yaml targets, or sends everything to Default
// when set (--target URL).
type RulesRouter struct {
	Rules   *triage.Rules
	Default *Route
	built   map[*triage.Target]Route
}

// NewRulesRouter builds every target's dispatcher once.
func NewRulesRouter(rules *triage.Rules, def *Route) *RulesRouter {
	r := &RulesRouter{Rules: rules, Default: def, built: map[*triage.Target]Route{}}
	for i := range rules.Targets {
		t := &rules.Targets[i]
		rt := Route{Name: t.TargetName()}
		if native := nativeRoute(t); native != nil {
			rt.Dispatcher = native
			rt.Prober, _ = native.(Prober)
		} else if t.HTTP != nil {
			h := NewHTTPTarget(t.HTTP.URL, t.HTTP.Probe, t.HTTP.Timeout, t.HTTP.Headers)
			rt.Dispatcher = h
			if t.HTTP.Probe != "" {
				rt.Prober = h
			}
		} else {
			rt.Dispatcher = &ExecTarget{Command: t.Exec.Command, Timeout: t.Exec.Timeout, Stdin: t.Exec.Stdin,
				Context: registry.ReplayContext}
		}
		r.built[t] = rt
	}
	return r
}

// Route implements Router.
func (r *RulesRouter) Route(e *entry.Entry) (Route, bool) {
	if r.Default != nil {
		return *r.Default, true
	}
	t := r.Rules.TargetFor(e)
	if t == nil {
		return Route{}, false
	}
	return r.built[t], true
}
