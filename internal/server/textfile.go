package server

import (
	"errors"
	"fmt"
	"os"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"

	"github.com/replayctl/replayctl/internal/replay"
)

// RunMetrics are the metrics of a scheduled `reconcile` (a cron job or a
// systemd timer, no server): the same names /metrics serves, written after
// the run to a node_exporter textfile. Counters stay counters across runs:
// each run starts from the values in the previous file, so rate() and the
// shipped alerts work unchanged. (Counters kept by the store itself, shared
// by every process, are the performance issue's work.)
type RunMetrics struct {
	m    *Metrics
	path string
	now  func() time.Time
}

// NewRunMetrics reads the counters of the previous run from path (a missing
// file is a first run; an unreadable one is an error naming it, never
// silently reset).
func NewRunMetrics(st Store, path string, now func() time.Time) (*RunMetrics, error) {
	r := &RunMetrics{m: newRunMetrics(st, now), path: path, now: now}
	if path == "" {
		// --push-url only: this run's counts. No first due time either: it
		// would be this run's start on every push, and a CronJob whose runs
		// all fail would never look stalled (its Jobs fail instead).
		return r, nil
	}
	// This run is due now; a previous file's first due time replaces it.
	r.m.firstDue.WithLabelValues().Set(float64(now().Unix()))
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metrics file: %w", err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		return nil, fmt.Errorf("metrics file %s is not in the Prometheus text format (move it away to start afresh): %w", path, err)
	}
	seed := func(name string, add func(labels map[string]string, v float64)) {
		fam := fams[name]
		if fam == nil {
			return
		}
		for _, mt := range fam.GetMetric() {
			labels := map[string]string{}
			for _, lp := range mt.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			add(labels, value(mt))
		}
	}
	vec := func(v *prometheus.CounterVec, label string) func(map[string]string, float64) {
		return func(l map[string]string, x float64) { v.WithLabelValues(l[label]).Add(x) }
	}
	one := func(c prometheus.Counter) func(map[string]string, float64) {
		return func(_ map[string]string, x float64) { c.Add(x) }
	}
	m := r.m
	seed("replayctl_decisions_total", vec(m.decisions, "action"))
	seed("replayctl_replay_outcomes_total", vec(m.outcomes, "outcome"))
	seed("replayctl_reconcile_runs_total", vec(m.runs, "result"))
	seed("replayctl_entries_ingested_total", one(m.ingested))
	seed("replayctl_replays_proposed_total", one(m.proposed))
	seed("replayctl_replays_denied_total", one(m.denied))
	seed("replayctl_reconcile_last_success_timestamp_seconds", func(_ map[string]string, x float64) {
		if x > 0 { // a file written before 0 meant "never"
			m.lastSuccess.WithLabelValues().Set(x)
		}
	})
	seed("replayctl_reconcile_first_due_timestamp_seconds", func(_ map[string]string, x float64) { m.firstDue.WithLabelValues().Set(x) })
	return r, nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// ObserveEntry counts one reconciled entry (the reconciler's OnEntry hook).
func (r *RunMetrics) ObserveEntry(res replay.EntryResult) { r.m.observeEntry(res) }

// ConfigInvalid records that rules.yaml or a policy did not load.
func (r *RunMetrics) ConfigInvalid() { r.m.configValid.Set(0) }

// Finish records the run's result and writes the file atomically (a
// temporary file in the same directory, renamed), so node_exporter never
// reads half a file.
func (r *RunMetrics) Finish(err error) error {
	if err != nil {
		r.m.runs.WithLabelValues("failed").Inc()
	} else {
		r.m.runs.WithLabelValues("succeeded").Inc()
		r.m.lastSuccess.WithLabelValues().Set(float64(r.now().Unix()))
	}
	if r.path == "" {
		return nil
	}
	if err := prometheus.WriteToTextfile(r.path, r.gatherer()); err != nil {
		return fmt.Errorf("write metrics file %s: %w", r.path, err)
	}
	return nil
}

// Push sends the metrics to a Pushgateway (client_golang's push package),
// replacing the group job="replayctl_reconcile"; call after Finish.
func (r *RunMetrics) Push(url string) error {
	if err := push.New(url, "replayctl_reconcile").Gatherer(r.gatherer()).Push(); err != nil {
		return fmt.Errorf("push metrics to %s: %w", url, err)
	}
	return nil
}

// gatherer leaves histograms out: one run's latencies written as a
// histogram would look like a counter reset at every run.
func (r *RunMetrics) gatherer() prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		fams, err := r.m.reg.Gather()
		out := fams[:0]
		for _, f := range fams {
			if f.GetType() != dto.MetricType_HISTOGRAM {
				out = append(out, f)
			}
		}
		return out, err
	})
}
