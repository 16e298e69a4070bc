package rabbitmq

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/replayctl/replayctl/internal/connector/connectortest"
)

// toDLQ publishes bodies straight to the bundle's DLQ (default exchange).
func (b *bundle) toDLQ(bodies ...string) {
	b.t.Helper()
	for _, body := range bodies {
		must(b.t, b.ch.PublishWithContext(context.Background(), "", b.dlq, false, false, amqp.Publishing{Body: []byte(body)}))
	}
	b.waitCount(b.dlq, len(bodies))
}

// The connector conformance suite (internal/connector/connectortest)
// against a real rabbitmq-server. A queue cannot be searched without
// consuming it (CannotProbe), and a message body is opaque bytes kept
// whole (KeepsAnyBytes).
func TestConformance(t *testing.T) {
	t.Run("probe agrees with entries", func(t *testing.T) {
		b := newBundle(t, nil)
		b.toDLQ(`{"order":1}`, `{"order":2}`)
		connectortest.ProbeAgreesWithEntries(t, b.connection, b.connection, connectortest.CannotProbe())
	})
	t.Run("settle idempotent", func(t *testing.T) {
		b := newBundle(t, nil)
		b.toDLQ(`{"order":1}`)
		es := connectortest.ReadAll(t, b.connection)
		if len(es) != 1 {
			t.Fatalf("read %d entries, want 1", len(es))
		}
		// Whether the broker still holds the message: closing the reader
		// gives every unacked delivery back to the queue.
		held := func() bool {
			must(t, b.connection.Close())
			deadline := time.Now().Add(2 * time.Second)
			for b.count(b.dlq) == 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			return b.count(b.dlq) != 0
		}
		connectortest.SettleIdempotent(t, b.connection, &es[0], held)
	})
	t.Run("no secret", func(t *testing.T) {
		b := newBundle(t, nil)
		b.toDLQ(`{"order":1}`)
		const secret = "rabbit-wrong-secret-51"
		// Refused, the password given in the URL and from the environment.
		inURL := strings.Replace(b.connSpec, "guest:guest@", "guest:"+secret+"@", 1)
		c, err := Open(inURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		connectortest.NoSecretInEntriesOrErrors(t, c, secret)
		fromEnv := strings.Replace(b.connSpec, "guest:guest@", "", 1)
		env := map[string]string{"RABBITMQ_USERNAME": "guest", "RABBITMQ_PASSWORD": secret}
		c2, err := OpenEnv(fromEnv, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c2.Close() })
		connectortest.NoSecretInEntriesOrErrors(t, c2, secret)
	})
	t.Run("any body kept", func(t *testing.T) {
		b := newBundle(t, nil)
		b.toDLQ(`{"order":1}`, `not json {`, "\xff\xfe\x00binary", "")
		connectortest.UndecodableStillYielded(t, b.connection, 4, connectortest.KeepsAnyBytes())
	})
}
