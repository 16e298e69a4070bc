package server

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/triage"
)

// newDispatchHistogram registers replayctl_dispatch_duration_seconds
// {target}: how long one replay dispatch took (the target's answer, or
// its timeout), per route. It lives apart from metrics.go so the run
// counters can change without touching it.
func newDispatchHistogram(reg prometheus.Registerer) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "replayctl_dispatch_duration_seconds",
		Help:    "Duration of one replay dispatch (request to the target until its answer or timeout), by target.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10)}, []string{"target"})
	reg.MustRegister(h)
	return h
}

// timeRouter wraps a router factory so that every dispatch of every route
// it returns is timed. Runs, single replays, bulk replays and approvals
// all build their router through Config.Router, so all are measured.
func timeRouter(next func(*triage.Rules) replay.Router, h *prometheus.HistogramVec) func(*triage.Rules) replay.Router {
	if next == nil {
		return nil
	}
	return func(rules *triage.Rules) replay.Router { return timedRouter{next: next(rules), h: h} }
}

type timedRouter struct {
	next replay.Router
	h    *prometheus.HistogramVec
}

func (t timedRouter) Route(e *entry.Entry) (replay.Route, bool) {
	r, ok := t.next.Route(e)
	if ok && r.Dispatcher != nil {
		r.Dispatcher = timedDispatcher{next: r.Dispatcher, obs: t.h.WithLabelValues(targetLabel(r.Name))}
	}
	return r, ok
}

type timedDispatcher struct {
	next replay.Dispatcher
	obs  prometheus.Observer
}

func (d timedDispatcher) Dispatch(ctx context.Context, r replay.Request) replay.Result {
	start := time.Now()
	res := d.next.Dispatch(ctx, r)
	d.obs.Observe(time.Since(start).Seconds())
	return res
}

// targetLabel is a route's name fit for a label: a --target URL keeps its
// scheme, host and path, never credentials or a query (which may carry a
// token); a system's own replay (SYSTEM:http(s)://...) keeps its SYSTEM.
func targetLabel(name string) string {
	prefix := ""
	if kind, rest, ok := strings.Cut(name, ":"); ok && kind != "" &&
		(strings.HasPrefix(rest, "http://") || strings.HasPrefix(rest, "https://")) {
		prefix, name = kind+":", rest
	}
	if u, err := url.Parse(name); err == nil && u.Host != "" {
		u.User, u.RawQuery, u.Fragment = nil, "", ""
		name = u.String()
	}
	return prefix + name
}
