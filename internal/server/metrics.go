package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/replayctl/replayctl/internal/buildinfo"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Metrics are replayctl's Prometheus metrics, on a registry of their own.
type Metrics struct {
	reg         *prometheus.Registry
	decisions   *prometheus.CounterVec
	outcomes    *prometheus.CounterVec
	ingested    prometheus.Counter
	proposed    prometheus.Counter
	denied      prometheus.Counter
	policyEval  prometheus.Histogram
	runDuration prometheus.Histogram
	runs        *prometheus.CounterVec
	// lastSuccess and firstDue have no labels; as vectors they are
	// exported only once set: a fresh serve exported a last success at
	// 0 (1970), and ReplayctlReconcileStalled fired within seconds.
	lastSuccess *prometheus.GaugeVec
	firstDue    *prometheus.GaugeVec
	configValid prometheus.Gauge
	// notifyFailed has no label: a webhook URL is often a secret.
	notifyFailed prometheus.Counter
}

func newMetrics(st Store, now func() time.Time) *Metrics {
	m := newRunMetrics(st, now)
	m.reg.MustRegister(collectors.NewGoCollector(), newProcessCollector())
	return m
}

// newRunMetrics are the replayctl metrics without the Go runtime and
// process collectors, which a textfile must not carry (node_exporter
// exports its own go_* and process_* and refuses duplicates).
func newRunMetrics(st Store, now func() time.Time) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "replayctl_decisions_total",
			Help: "Decisions taken by reconcile, by final action."}, []string{"action"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "replayctl_replay_outcomes_total",
			Help: "Replay dispatch outcomes (succeeded, failed, outcome_unknown, retry)."}, []string{"outcome"}),
		ingested: prometheus.NewCounter(prometheus.CounterOpts{Name: "replayctl_entries_ingested_total",
			Help: "Entries seen for the first time; its rate is the DLQ growth rate."}),
		proposed: prometheus.NewCounter(prometheus.CounterOpts{Name: "replayctl_replays_proposed_total",
			Help: "Decisions where rules proposed a replay."}),
		denied: prometheus.NewCounter(prometheus.CounterOpts{Name: "replayctl_replays_denied_total",
			Help: "Proposed replays that did not end in a replay (policy, approval, ledger or source)."}),
		policyEval: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "replayctl_policy_eval_seconds",
			Help: "Latency of one Rego policy evaluation.", Buckets: prometheus.ExponentialBuckets(10e-6, 2.5, 12)}),
		runDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "replayctl_reconcile_duration_seconds",
			Help: "Duration of reconcile runs.", Buckets: prometheus.ExponentialBuckets(0.01, 3, 12)}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "replayctl_reconcile_runs_total",
			Help: "Reconcile runs by result (succeeded, failed, skipped_overrun)."}, []string{"result"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "replayctl_reconcile_last_success_timestamp_seconds",
			Help: "Unix time the last successful reconcile finished; absent until one has."}, nil),
		firstDue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "replayctl_reconcile_first_due_timestamp_seconds",
			Help: "Unix time the first scheduled reconcile was due (serve --every: its start; reconcile --metrics-file: its first run); absent without a schedule. ReplayctlReconcileStalled counts from it until a run succeeds."}, nil),
		configValid: prometheus.NewGauge(prometheus.GaugeOpts{Name: "replayctl_config_valid",
			Help: "1 if rules.yaml and the policies loaded at the last check, 0 if not (runs are refused)."}),
	}
	m.configValid.Set(1)
	m.notifyFailed = prometheus.NewCounter(prometheus.CounterOpts{Name: "replayctl_notifications_failed_total",
		Help: "Approver notifications given up after every retry."})
	m.reg.MustRegister(m.notifyFailed)
	in := buildinfo.Get()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{Name: "replayctl_build_info",
		Help:        "Always 1; its labels say which build is running (join on it to compare versions across hosts).",
		ConstLabels: prometheus.Labels{"version": in.Version, "commit": in.Commit, "goversion": in.Go, "opa": in.OPA, "bbolt": in.Bbolt}})
	buildInfo.Set(1)
	m.reg.MustRegister(buildInfo)
	m.reg.MustRegister(m.decisions, m.outcomes, m.ingested, m.proposed, m.denied, m.policyEval, m.runDuration, m.runs,
		m.lastSuccess, m.firstDue, m.configValid, &stateCollector{st: st, now: now})
	registerTail(m.reg, st)
	registerTamper(m.reg, st)
	return m
}

func (m *Metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// observeEntry counts one reconciled entry.
func (m *Metrics) observeEntry(res replay.EntryResult) {
	m.decisions.WithLabelValues(string(res.Final)).Inc()
	for _, o := range res.Replays {
		m.outcomes.WithLabelValues(o).Inc()
	}
	if res.New {
		m.ingested.Inc()
	}
	// Only a decision that changed (a new record) counts: an entry held for
	// approval is decided the same on every run, and counting it each time
	// made the denial rate 100% forever with no new replays (issue 19).
	if res.Recorded && res.Decision.ProposedAction == triage.AutoReplay && res.Final != triage.Skip {
		m.proposed.Inc()
		if res.Final != triage.AutoReplay {
			m.denied.Inc()
		}
	}
}

// timedPolicy observes evaluation latency.
type timedPolicy struct {
	p triage.Policy
	h prometheus.Histogram
}

func (m *Metrics) timePolicy(p triage.Policy) triage.Policy {
	if p == nil {
		return nil
	}
	return timedPolicy{p: p, h: m.policyEval}
}

func (t timedPolicy) Evaluate(ctx context.Context, in *triage.PolicyInput) (triage.PolicyResult, error) {
	start := time.Now()
	res, err := t.p.Evaluate(ctx, in)
	t.h.Observe(time.Since(start).Seconds())
	return res, err
}

// gauges reads entries by (class, action, state), open depth by (source,
// topic) and the oldest open entry's last failure from the store's
// counters (Gauges: Counters also reads every day and failure signature
// the store has seen, which grow with the store): a scrape costs the same
// at any store size.
func (c *stateCollector) gauges(ctx context.Context) (*store.Gauges, error) {
	return c.st.Gauges(ctx)
}

// stateCollector reads the store at scrape time: entries by class, action
// and state; approvals pending and the age of the oldest.
type stateCollector struct {
	st  Store
	now func() time.Time
}

var (
	entriesDesc = prometheus.NewDesc("replayctl_entries", "Stored entries by class, action and state.",
		[]string{"class", "action", "state"}, nil)
	pendingDesc = prometheus.NewDesc("replayctl_approvals_pending", "Open approval requests by approver group.",
		[]string{"group"}, nil)
	oldestDesc = prometheus.NewDesc("replayctl_approvals_oldest_pending_age_seconds",
		"Age of the oldest open approval request.", nil, nil)
	depthDesc = prometheus.NewDesc("replayctl_open_entries",
		"Entries not yet replayed or resolved, by source kind and topic (the DLQ depth).", []string{"source", "topic"}, nil)
	oldestEntryDesc = prometheus.NewDesc("replayctl_oldest_open_entry_age_seconds",
		"Time since the last failure (first seen when the source gives none) of the open entry that failed longest ago: the age the console's list and the CLI's --older-than use.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- entriesDesc
	ch <- pendingDesc
	ch <- oldestDesc
	ch <- oldestEntryDesc
	ch <- depthDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := c.now()
	g, err := c.gauges(ctx)
	if err != nil {
		// The scrape says the counts could not be read (it fails), rather
		// than exporting zeros.
		ch <- prometheus.NewInvalidMetric(entriesDesc, err)
		return
	}
	var oldestEntry time.Duration
	if !g.OldestOpen.IsZero() {
		oldestEntry = max(0, now.Sub(g.OldestOpen))
	}
	ch <- prometheus.MustNewConstMetric(oldestEntryDesc, prometheus.GaugeValue, oldestEntry.Seconds())
	// Cells are per source too; the exposed family has no source label.
	entries := make(map[[3]string]int64, len(g.Cells))
	for _, cl := range g.Cells {
		entries[[3]string{cl.Class, cl.Action, cl.State}] += cl.N
	}
	for k, n := range entries {
		ch <- prometheus.MustNewConstMetric(entriesDesc, prometheus.GaugeValue, float64(n), k[0], k[1], k[2])
	}
	for _, d := range g.Open { // one counter per (source, topic)
		ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(d.N), d.Source, d.Topic)
	}
	// The open requests, as the console's overview reads them (from the
	// store's index where it keeps one, else a listing).
	pending := map[string]int{}
	var oldest time.Duration
	_ = pendingApprovals(ctx, c.st, now, func(a *store.Approval) {
		pending[a.ApproverGroup]++
		oldest = max(oldest, now.Sub(a.RequestedAt))
	})
	for g, n := range pending {
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n), g)
	}
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, oldest.Seconds())
}
