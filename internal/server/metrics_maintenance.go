package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayctl/replayctl/internal/maintenance"
)

var (
	maintRunsDesc = prometheus.NewDesc("replayctl_maintenance_runs_total",
		"Rounds of each background duty (serve's recover-dispatches, audit-sealer, approval-reminders, retention), failed ones included.",
		[]string{"service"}, nil)
	maintErrorsDesc = prometheus.NewDesc("replayctl_maintenance_errors_total",
		"Rounds of each background duty that failed (the next round tries again).", []string{"service"}, nil)
	maintLastDesc = prometheus.NewDesc("replayctl_maintenance_last_run_timestamp_seconds",
		"Unix time each background duty's last round ended; absent until one has.", []string{"service"}, nil)
)

// maintenanceCollector exports the duties' records, read at each scrape.
type maintenanceCollector struct{ g *maintenance.Group }

func (c maintenanceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- maintRunsDesc
	ch <- maintErrorsDesc
	ch <- maintLastDesc
}

func (c maintenanceCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.g.Statuses() {
		if s.Every <= 0 {
			continue // a loop (the reconcile schedule) has its own metrics
		}
		ch <- prometheus.MustNewConstMetric(maintRunsDesc, prometheus.CounterValue, float64(s.Runs), s.Name)
		ch <- prometheus.MustNewConstMetric(maintErrorsDesc, prometheus.CounterValue, float64(s.Errors), s.Name)
		if !s.LastRun.IsZero() {
			ch <- prometheus.MustNewConstMetric(maintLastDesc, prometheus.GaugeValue, float64(s.LastRun.UnixNano())/1e9, s.Name)
		}
	}
}
