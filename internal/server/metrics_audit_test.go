package server

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// tailOf is a store with an unsealed audit tail of n records (the
// PostgreSQL store, whose own tests prove the count).
type tailOf int

func (n tailOf) AuditUnsealed(context.Context) (int, error) { return int(n), nil }

// Issue 16: the unsealed tail of the PostgreSQL audit chain is visible as
// a metric, so an alert can fire when no sealer runs.
func TestUnsealedAuditTailIsAMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	registerTail(reg, tailOf(7))
	want := `# HELP replayctl_audit_unsealed_records ` + unsealedHelp + `
# TYPE replayctl_audit_unsealed_records gauge
replayctl_audit_unsealed_records 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "replayctl_audit_unsealed_records"); err != nil {
		t.Fatal(err)
	}
	// bbolt chains every record as it appends it: its tail is 0.
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	b.reconcile("operator")
	reg = prometheus.NewRegistry()
	registerTail(reg, b.store)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.Replace(want, " 7\n", " 0\n", 1)), "replayctl_audit_unsealed_records"); err != nil {
		t.Fatal(err)
	}
}

// Issue 29: a keyed write refused on a forged head is alertable: the
// store's refusals are exported as a counter (0 on an intact store).
func TestTamperRefusalsAreExported(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	if m := scrape(t, b); !strings.Contains(m, "replayctl_audit_tamper_refusals_total 0\n") {
		t.Fatalf("no replayctl_audit_tamper_refusals_total in:\n%s", m)
	}
}
