package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/replayctl/replayctl/internal/replay"
)

// states is the breakers as a run left them (the gauge only reads them).
type states []replay.BreakerState

func (s states) States() []replay.BreakerState { return s }

func TestBreakerGaugeHasOneSeriesPerTarget(t *testing.T) {
	c := newBreakerCollector(states{{Target: "cordum", State: replay.BreakerOpen},
		{Target: "orders", State: replay.BreakerClosed}, {Target: "prodigy", State: replay.BreakerHalfOpen}})
	want := `# HELP replayctl_target_breaker_state Circuit breaker of each replay target: 0 closed, 1 half-open (one trial out), 2 open (its entries wait).
# TYPE replayctl_target_breaker_state gauge
replayctl_target_breaker_state{target="cordum"} 2
replayctl_target_breaker_state{target="orders"} 0
replayctl_target_breaker_state{target="prodigy"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// The server's /metrics carries the gauge of the breakers its runs share.
func TestServerRegistersTheBreakerGauge(t *testing.T) {
	b := replay.NewBreakers(replay.SystemClock{})
	s, err := New(Config{Breakers: b})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Breakers != b {
		t.Fatal("the server did not keep the breakers it was given")
	}
	var dup prometheus.AlreadyRegisteredError
	if err := s.metrics.reg.Register(newBreakerCollector(b)); !errors.As(err, &dup) {
		t.Fatalf("the breaker gauge is not registered on /metrics: %v", err)
	}
}
