package sqs

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/replayctl/replayctl/internal/connector"
)

// A handle older than the visibility timeout may have been replaced by
// another consumer's receive; SQS then answers a delete with it with
// success and deletes nothing (API_DeleteMessage). Settle must not claim
// the message left the DLQ: it errs, so the write-back stays pending.
func TestSettleWithPossiblyStaleHandleStaysOwed(t *testing.T) {
	b := newBundle(t, false)
	b.deadLetter(`{"o":1}`, nil, "")
	got := readAll(t, b.conn)
	if len(got) != 1 {
		t.Fatalf("read %d", len(got))
	}
	// The visibility timeout passes; another consumer receives it.
	b.srv.ExpireVisibility(b.dlq)
	if out, err := b.app.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{
		QueueUrl: aws.String(b.srv.URLOf(b.dlq)), MaxNumberOfMessages: 10}); err != nil || len(out.Messages) != 1 {
		t.Fatalf("other consumer's receive: %v %v", out, err)
	}
	later := time.Now().Add(DefaultVisibility + time.Second)
	b.conn.now = func() time.Time { return later }
	err := b.conn.Settle(context.Background(), &got[0], connector.Settlement{Replayed: true})
	if n := len(b.srv.Messages(b.dlq)); n != 1 {
		t.Fatalf("DLQ holds %d", n)
	}
	if err == nil {
		t.Fatal("settle claimed a delete that deleted nothing: the message is still in the DLQ")
	}
	if !strings.Contains(err.Error(), "visibility") {
		t.Errorf("error does not say why: %v", err)
	}
	// Settling again (a retry in this run) still does not claim it.
	if err := b.conn.Settle(context.Background(), &got[0], connector.Settlement{Replayed: true}); err == nil {
		t.Error("second settle claimed it")
	}
}

// A handle within its visibility timeout is the latest: it deletes.
func TestSettleWithFreshHandleDeletes(t *testing.T) {
	b := newBundle(t, false)
	b.deadLetter(`{"o":1}`, nil, "")
	got := readAll(t, b.conn)
	if len(got) != 1 {
		t.Fatalf("read %d", len(got))
	}
	if err := b.conn.Settle(context.Background(), &got[0], connector.Settlement{Replayed: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(b.srv.Messages(b.dlq)); n != 0 {
		t.Fatalf("DLQ holds %d", n)
	}
}

// The in-flight note counts this read's messages as its own, not the
// handles an earlier read on the same connector left behind.
func TestShortReadCountsOthersInFlightAgainstThisRead(t *testing.T) {
	b := newBundle(t, false)
	for i := range 3 {
		b.deadLetter(`{"o":`+string(rune('1'+i))+`}`, nil, "")
	}
	if got := readAll(t, b.conn); len(got) != 3 {
		t.Fatalf("first read %d", len(got))
	}
	b.srv.ExpireVisibility(b.dlq)
	// Between the second read's count and its receive, another consumer
	// takes all three.
	var armed atomic.Bool
	armed.Store(true)
	b.srv.Fault = func(op string) int {
		if op == "ReceiveMessage" && armed.CompareAndSwap(true, false) {
			if _, err := b.app.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{
				QueueUrl: aws.String(b.srv.URLOf(b.dlq)), MaxNumberOfMessages: 10}); err != nil {
				t.Error(err)
			}
		}
		return 0
	}
	if got := readAll(t, b.conn); len(got) != 0 {
		t.Fatalf("second read %d", len(got))
	}
	notes := strings.Join(b.conn.Notes(), "\n")
	if !strings.Contains(notes, "about 3 more are in flight") {
		t.Fatalf("notes:\n%s", notes)
	}
}

// This run's read receives the message again while its delete is on the
// way (its visibility ended mid-settle): the delete went out with the
// replaced handle, which SQS answers with success and may not honour.
// Settle must not claim the delete.
func TestSettleRacingAReceiveStaysOwed(t *testing.T) {
	b := newBundle(t, false)
	b.deadLetter(`{"o":1}`, nil, "")
	got := readAll(t, b.conn)
	if len(got) != 1 {
		t.Fatalf("read %d", len(got))
	}
	var armed atomic.Bool
	armed.Store(true)
	b.srv.Fault = func(op string) int {
		if op == "DeleteMessage" && armed.CompareAndSwap(true, false) {
			b.srv.ExpireVisibility(b.dlq)
			if again := readAll(t, b.conn); len(again) != 1 {
				t.Errorf("read during the delete: %d", len(again))
			}
		}
		return 0
	}
	err := b.conn.Settle(context.Background(), &got[0], connector.Settlement{Replayed: true})
	if n := len(b.srv.Messages(b.dlq)); n != 1 {
		t.Fatalf("DLQ holds %d", n)
	}
	if err == nil {
		t.Fatal("settle claimed a delete made with a handle replaced during it")
	}
	// With the fresh handle, a retry deletes it.
	if err := b.conn.Settle(context.Background(), &got[0], connector.Settlement{Replayed: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(b.srv.Messages(b.dlq)); n != 0 {
		t.Fatalf("DLQ holds %d after the retry", n)
	}
}
