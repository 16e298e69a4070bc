package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayctl/replayctl/internal/replay"
)

// breakerStates is what the breaker gauge reads: the runs' shared
// breakers (replay.Breakers).
type breakerStates interface {
	States() []replay.BreakerState
}

// breakerCollector exports replayctl_target_breaker_state{target}, read
// from the breakers at scrape time (no walk of the store).
type breakerCollector struct {
	b    breakerStates
	desc *prometheus.Desc
}

func newBreakerCollector(b breakerStates) *breakerCollector {
	return &breakerCollector{b: b, desc: prometheus.NewDesc("replayctl_target_breaker_state",
		"Circuit breaker of each replay target: 0 closed, 1 half-open (one trial out), 2 open (its entries wait).",
		[]string{"target"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.b.States() {
		v := 0.0
		switch s.State {
		case replay.BreakerHalfOpen:
			v = 1
		case replay.BreakerOpen:
			v = 2
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, s.Target)
	}
}

// breakerStates is this process's breakers (none until a run has tried a
// target).
func (s *Server) breakerStates() []replay.BreakerState { return s.cfg.Breakers.States() }
