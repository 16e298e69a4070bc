package sqs

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/replayctl/replayctl/internal/connector/connectortest"
)

// toDLQ sends bodies straight to the bundle's DLQ.
func (b *bundle) toDLQ(bodies ...string) {
	b.t.Helper()
	for _, body := range bodies {
		if _, err := b.app.SendMessage(context.Background(), &awssqs.SendMessageInput{
			QueueUrl: aws.String(b.srv.URLOf(b.dlq)), MessageBody: aws.String(body)}); err != nil {
			b.t.Fatal(err)
		}
	}
}

// The connector conformance suite (internal/connector/connectortest)
// against the SQS-compatible test server (sqstest). A queue cannot be
// searched for a message (CannotProbe), and a body is text kept whole
// whatever it holds (KeepsAnyBytes; SQS itself refuses bodies that are
// not Unicode or empty).
func TestConformance(t *testing.T) {
	t.Run("probe agrees with entries", func(t *testing.T) {
		b := newBundle(t, false)
		b.toDLQ(`{"o":1}`, `{"o":2}`)
		connectortest.ProbeAgreesWithEntries(t, b.conn, b.conn, connectortest.CannotProbe())
	})
	t.Run("settle idempotent", func(t *testing.T) {
		b := newBundle(t, false)
		b.toDLQ(`{"o":1}`)
		es := connectortest.ReadAll(t, b.conn)
		if len(es) != 1 {
			t.Fatalf("read %d entries, want 1", len(es))
		}
		connectortest.SettleIdempotent(t, b.conn, &es[0], func() bool { return len(b.srv.Messages(b.dlq)) != 0 })
	})
	t.Run("no secret", func(t *testing.T) {
		b := newBundle(t, false) // AWS_SECRET_ACCESS_KEY is test-secret-do-not-print
		b.toDLQ(`{"o":1}`)
		connectortest.NoSecretInEntriesOrErrors(t, b.conn, "test-secret-do-not-print")
		gone, err := Open("sqs:" + b.srv.URLOf("no-such-queue") + "?wait=0s") // refused
		if err != nil {
			t.Fatal(err)
		}
		connectortest.NoSecretInEntriesOrErrors(t, gone, "test-secret-do-not-print")
	})
	t.Run("any body kept", func(t *testing.T) {
		b := newBundle(t, false)
		b.toDLQ(`{"o":1}`, `not json {`, "<order id='7'/>", "ünïcödé \u2028 line")
		connectortest.UndecodableStillYielded(t, b.conn, 4, connectortest.KeepsAnyBytes())
	})
}
