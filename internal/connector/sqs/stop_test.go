package sqs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
)

// TestReadStoppedEarlyNotesTheInvisibleMessages: a caller that stops
// taking entries (its store failed, say) leaves the rest of the answer it
// was reading and the answer received ahead invisible until their
// visibility timeout: nothing is deleted, every message is read again
// once the timeout ends, and the run's notes say so instead of ending on
// "held about 25" with no word on the messages taken off the queue.
func TestReadStoppedEarlyNotesTheInvisibleMessages(t *testing.T) {
	b := newBundle(t, false)
	const n = 25
	for i := range n {
		if _, err := b.app.SendMessage(context.Background(), &awssqs.SendMessageInput{QueueUrl: aws.String(b.srv.URLOf(b.dlq)),
			MessageBody: aws.String(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range b.conn.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	for deadline := time.Now().Add(10 * time.Second); b.srv.Calls("ReceiveMessage") < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	noted := false
	for _, s := range b.conn.Notes() {
		noted = noted || strings.Contains(s, "visibility timeout")
	}
	if !noted {
		t.Errorf("a read stopped after 1 of %d messages, with more received, notes nothing on them: %q", n, b.conn.Notes())
	}
	if got := len(b.srv.Messages(b.dlq)); got != n {
		t.Errorf("the DLQ holds %d messages after a read stopped early, want all %d", got, n)
	}
	b.srv.ExpireVisibility(b.dlq)
	c, err := Open("sqs:" + b.srv.URLOf(b.dlq) + "?wait=0s")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(readAll(t, c)); got != n {
		t.Errorf("after the visibility timeout a new read got %d of %d", got, n)
	}
}
