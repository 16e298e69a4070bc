package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector/connectortest"
)

// The connector conformance suite (internal/connector/connectortest)
// against franz-go's kfake. A topic cannot be searched for a replayed
// record without scanning it (CannotProbe), and a record value is opaque
// bytes kept whole (KeepsAnyBytes). The connector takes no credential
// (no SASL): it has no secret for the suite's secret check to follow.
func TestConformance(t *testing.T) {
	t.Run("probe agrees with entries", func(t *testing.T) {
		c := newCluster(t)
		c.produce(springDLT("k1", `{"o":1}`, 0, 1, "x.Y", "", "m"), springDLT("k2", `{"o":2}`, 1, 2, "x.Y", "", "m"))
		conn := c.open("")
		connectortest.ProbeAgreesWithEntries(t, conn, conn, connectortest.CannotProbe())
	})
	t.Run("settle idempotent", func(t *testing.T) {
		c := newCluster(t)
		c.produce(springDLT("k1", `{"o":1}`, 0, 1, "x.Y", "", "m"))
		conn := c.open("")
		es := connectortest.ReadAll(t, conn)
		if len(es) != 1 {
			t.Fatalf("read %d entries, want 1", len(es))
		}
		// A topic keeps its records until retention whatever replayctl
		// settles: there is nothing to ask it.
		connectortest.SettleIdempotent(t, conn, &es[0], nil)
	})
	t.Run("any value kept", func(t *testing.T) {
		c := newCluster(t)
		for _, v := range []string{`{"o":1}`, `not json {`, "\xff\xfe\x00binary", ""} {
			c.produce(&kgo.Record{Topic: "orders.DLT", Partition: 0, Key: []byte("k"), Value: []byte(v)})
		}
		c.produce(&kgo.Record{Topic: "orders.DLT", Partition: 1}) // null key and value
		connectortest.UndecodableStillYielded(t, c.open(""), 5, connectortest.KeepsAnyBytes())
	})
}
