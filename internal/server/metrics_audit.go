package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayctl/replayctl/internal/audit"
)

const unsealedHelp = "Audit records written after the sealed head of the chain (PostgreSQL; 0 on bbolt): not yet chained, so not yet verifiable. Stays small while a sealer runs."

var unsealedDesc = prometheus.NewDesc("replayctl_audit_unsealed_records", unsealedHelp, nil, nil)

// tailCollector reports the unsealed tail of a store whose writers append
// unchained records (audit.TailReader).
type tailCollector struct{ tr audit.TailReader }

func (c tailCollector) Describe(ch chan<- *prometheus.Desc) { ch <- unsealedDesc }

func (c tailCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := c.tr.AuditUnsealed(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(unsealedDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(unsealedDesc, prometheus.GaugeValue, float64(n))
}

// registerTail adds the tail gauge (0 on bbolt, which chains every record
// as it appends it).
func registerTail(reg *prometheus.Registry, tr audit.TailReader) {
	reg.MustRegister(tailCollector{tr})
}

// registerTamper exports the refusals: alert on any increase, the store
// was edited behind replayctl's back and nothing is appended until a
// person restores it.
func registerTamper(reg *prometheus.Registry, st Store) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "replayctl_audit_tamper_refusals_total",
		Help: "Audit appends or seals refused because the chain head or an unsealed record is not signed with the audit key: the store was edited outside replayctl (audit verify says where)."},
		func() float64 { return float64(st.AuditTamperRefusals()) }))
}
