package sqs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/connector/sqs/sqstest"
	"github.com/replayctl/replayctl/internal/entry"
)

// bundle is one test's fake SQS with an orders queue whose redrive policy
// moves a message received twice to orders-dlq.
type bundle struct {
	t    *testing.T
	srv  *sqstest.Server
	app  *awssqs.Client // the application's own client
	conn *Conn
	src  string // orders queue name
	dlq  string
}

func newBundle(t *testing.T, fifo bool) *bundle {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret-do-not-print")
	t.Setenv("AWS_REGION", sqstest.Region)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	b := &bundle{t: t, srv: sqstest.New(t), src: "orders", dlq: "orders-dlq"}
	if fifo {
		b.src, b.dlq = "orders.fifo", "orders-dlq.fifo"
	}
	b.srv.CreateQueue(b.dlq, "", 0)
	b.srv.CreateQueue(b.src, b.dlq, 2)
	var err error
	if b.conn, err = Open("sqs:" + b.srv.URLOf(b.dlq) + "?wait=0s"); err != nil {
		t.Fatal(err)
	}
	b.app = awssqs.New(awssqs.Options{Region: sqstest.Region, BaseEndpoint: aws.String(b.srv.URL),
		Credentials: aws.AnonymousCredentials{}})
	return b
}

func str(s string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

// deadLetter sends a message to the source queue and fails it as a
// consumer does (receives it, never deletes it) until the redrive policy
// moves it to the DLQ.
func (b *bundle) deadLetter(body string, attrs map[string]types.MessageAttributeValue, group string) {
	b.t.Helper()
	in := &awssqs.SendMessageInput{QueueUrl: aws.String(b.srv.URLOf(b.src)), MessageBody: &body, MessageAttributes: attrs}
	if group != "" {
		in.MessageGroupId, in.MessageDeduplicationId = &group, aws.String(body)
	}
	if _, err := b.app.SendMessage(context.Background(), in); err != nil {
		b.t.Fatal(err)
	}
	b.failAll()
}

func (b *bundle) failAll() {
	b.t.Helper()
	for range 3 {
		if _, err := b.app.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{QueueUrl: aws.String(b.srv.URLOf(b.src)),
			MaxNumberOfMessages: 10}); err != nil {
			b.t.Fatal(err)
		}
		b.srv.ExpireVisibility(b.src) // its visibility timeout ends: received again
	}
}

func readAll(t *testing.T, c *Conn) []entry.Entry {
	t.Helper()
	var out []entry.Entry
	for e, err := range c.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestReadClassifiesDeadLetters(t *testing.T) {
	b := newBundle(t, false)
	stack := "org.springframework.messaging.MessagingException: listener failed\nCaused by: %s: %s\n"
	cases := []struct {
		body  string
		attrs map[string]types.MessageAttributeValue
		code  string
		msg   string
	}{
		{`{"o":1}`, map[string]types.MessageAttributeValue{"x-exception-stacktrace": str(fmt.Sprintf(stack, "java.net.SocketTimeoutException", "Read timed out"))}, brokermsg.CodeTimeout, "listener failed"},
		{`{"o":`, map[string]types.MessageAttributeValue{"x-exception-message": str("Unexpected end-of-input"),
			"x-exception-stacktrace": str(fmt.Sprintf(stack, "com.fasterxml.jackson.core.JsonParseException", "x"))}, brokermsg.CodeParse, "end-of-input"},
		{`{"o":3}`, map[string]types.MessageAttributeValue{"x-exception-message": str("User: arn:x is not authorized to perform: dynamodb:PutItem (AccessDeniedException)")}, brokermsg.CodeDenied, "not authorized"},
		{`{"o":4}`, nil, codeMaxReceive, ""},
		{`{"o":5}`, map[string]types.MessageAttributeValue{"tenant": str("acme"),
			"blob": {DataType: aws.String("Binary"), BinaryValue: []byte{0xff, 0}}}, codeMaxReceive, ""},
	}
	for _, c := range cases {
		b.deadLetter(c.body, c.attrs, "")
	}
	got := readAll(t, b.conn)
	if len(got) != len(cases) {
		t.Fatalf("read %d, want %d", len(got), len(cases))
	}
	byBody := map[string]entry.Entry{}
	for _, e := range got {
		var env envelope
		if err := jsonUnmarshal(e.Payload, &env); err != nil {
			t.Fatal(err)
		}
		body, _ := env.Bytes()
		byBody[string(body)] = e
	}
	for _, c := range cases {
		e, ok := byBody[c.body]
		if !ok {
			t.Errorf("%s: not read", c.body)
			continue
		}
		if e.ReasonCode != c.code || !strings.Contains(e.Message, c.msg) || (c.msg == "" && e.Message != "") {
			t.Errorf("%s: code %q message %q, want %q %q", c.body, e.ReasonCode, e.Message, c.code, c.msg)
		}
		if e.Topic != b.src || e.Scope != b.dlq || e.Source != Kind || e.Attempts < 1 || e.FirstFailure.IsZero() {
			t.Errorf("%s: entry %+v", c.body, e)
		}
	}
	if notes := strings.Join(b.conn.Notes(), "\n"); !strings.Contains(notes, "held about 5") || !strings.Contains(notes, "read 5") {
		t.Errorf("notes: %s", notes)
	}
}

// Nothing is deleted from the DLQ by reading or storing; a replayed
// message is deleted with this run's receipt handle; the others become
// visible again for the next run.
func TestReplaySettleAndLineage(t *testing.T) {
	b := newBundle(t, false)
	b.deadLetter(`{"o":1}`, map[string]types.MessageAttributeValue{"tenant": str("acme")}, "")
	b.deadLetter(`{"o":2}`, nil, "")
	got := readAll(t, b.conn)
	if len(got) != 2 {
		t.Fatalf("read %d", len(got))
	}
	e := got[0]
	res := b.conn.Replay(context.Background(), connector.Request{Entry: &e, Key: e.IdempotencyKey, Attempt: 1})
	if res.Outcome != connector.Succeeded {
		t.Fatalf("replay: %v %s", res.Outcome, res.Detail)
	}
	src := b.srv.Messages(b.src)
	if len(src) != 1 || src[0].Attributes[brokermsg.HeaderKey].StringValue == nil ||
		*src[0].Attributes[brokermsg.HeaderKey].StringValue != e.IdempotencyKey || *src[0].Attributes[brokermsg.HeaderCount].StringValue != "1" {
		t.Fatalf("source queue holds %+v", src)
	}
	if len(b.srv.Messages(b.dlq)) != 2 {
		t.Fatal("a replay deleted from the DLQ before its settle")
	}
	if err := b.conn.Settle(context.Background(), &e, connector.Settlement{Replayed: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.conn.Settle(context.Background(), &e, connector.Settlement{Replayed: true}); err != nil {
		t.Errorf("settling twice: %v", err)
	}
	dlq := b.srv.Messages(b.dlq)
	if len(dlq) != 1 || dlq[0].ID != got[1].ID {
		t.Fatalf("DLQ after settle: %+v", dlq)
	}
	// The next run sees only the other one (once its visibility ends:
	// the first run's clock moves past it too).
	b.srv.ExpireVisibility(b.dlq)
	later := time.Now().Add(DefaultVisibility)
	b.conn.now = func() time.Time { return later }
	next, err := Open(b.conn.Origin() + "?wait=0s")
	if err != nil {
		t.Fatal(err)
	}
	if again := readAll(t, next); len(again) != 1 || again[0].ID != got[1].ID || again[0].IdempotencyKey != got[1].IdempotencyKey {
		t.Fatalf("second read %v", again)
	}
	// A settle by a connector that did not receive it stays owed.
	if err := b.conn.Settle(context.Background(), &got[1], connector.Settlement{}); err == nil {
		t.Error("settled with a receipt handle from an earlier receive")
	}
	// The replayed message fails again and comes back, linked.
	b.failAll()
	b.srv.ExpireVisibility(b.dlq)
	var back *entry.Entry
	for _, r := range readAll(t, next) {
		if r.ID != got[1].ID {
			back = &r
		}
	}
	if back == nil || back.Labels[brokermsg.LabelReplayOf] != e.IdempotencyKey || back.Labels[brokermsg.LabelReplayCount] != "1" || back.ID == e.ID {
		t.Fatalf("returning entry %+v", back)
	}
}

func TestReplayToFIFO(t *testing.T) {
	b := newBundle(t, true)
	b.deadLetter(`{"o":1}`, nil, "customer-9")
	e := readAll(t, b.conn)[0]
	for range 2 { // a second send of the same key is deduplicated by SQS
		if res := b.conn.Replay(context.Background(), connector.Request{Entry: &e, Key: e.IdempotencyKey}); res.Outcome != connector.Succeeded {
			t.Fatalf("replay: %v %s", res.Outcome, res.Detail)
		}
	}
	src := b.srv.Messages(b.src)
	if len(src) != 1 || src[0].GroupID != "customer-9" || src[0].DedupID != DedupID(e.IdempotencyKey) || len(src[0].DedupID) > 128 {
		t.Fatalf("source queue holds %+v", src)
	}
}

func TestReplayOutcomes(t *testing.T) {
	b := newBundle(t, false)
	b.deadLetter(`{"o":1}`, nil, "")
	e := readAll(t, b.conn)[0]
	status := 0
	b.srv.Fault = func(op string) int {
		if op == "SendMessage" {
			return status
		}
		return 0
	}
	for _, c := range []struct {
		status int
		want   connector.Outcome
	}{{500, connector.Retry}, {403, connector.Failed}} {
		status = c.status
		before := b.srv.Calls("SendMessage")
		if res := b.conn.Replay(context.Background(), connector.Request{Entry: &e, Key: "k"}); res.Outcome != c.want {
			t.Errorf("send answered %d: %v %s", c.status, res.Outcome, res.Detail)
		}
		if n := b.srv.Calls("SendMessage") - before; n != 1 {
			t.Errorf("send answered %d was sent %d times: the SDK retried without the ledger", c.status, n)
		}
	}
	status = 0
	// A DLQ that several queues use, and a message that does not say
	// which: no guess.
	other := e
	other.Payload = []byte(strings.Replace(string(e.Payload), sqstest.ARNOf(b.src), "", 1))
	b.srv.CreateQueue("billing", b.dlq, 2)
	if res := b.conn.Replay(context.Background(), connector.Request{Entry: &other, Key: "k"}); res.Outcome != connector.Failed || !strings.Contains(res.Detail, "2 queues") {
		t.Errorf("ambiguous source: %v %s", res.Outcome, res.Detail)
	}
	b.srv.Close()
	if res := b.conn.Replay(context.Background(), connector.Request{Entry: &e, Key: "k"}); res.Outcome != connector.NotSent || !res.TargetDown {
		t.Errorf("server down: %v %s", res.Outcome, res.Detail)
	}
	for _, s := range []string{res(b, &e).Detail, b.conn.String(), b.conn.Origin()} {
		if strings.Contains(s, "test-secret") || strings.Contains(s, "AKIDTEST") {
			t.Errorf("a credential in %q", s)
		}
	}
}

func res(b *bundle, e *entry.Entry) connector.Result {
	return b.conn.Replay(context.Background(), connector.Request{Entry: e, Key: "k"})
}

func TestSpec(t *testing.T) {
	env := func(string) string { return "" }
	c, err := OpenEnv("sqs:https://sqs.eu-west-1.amazonaws.com/123456789012/orders-dlq?visibility=45s", env)
	if err != nil || c.region != "eu-west-1" || c.visibility.Seconds() != 45 || c.name != "orders-dlq" ||
		c.queueURL != "https://sqs.eu-west-1.amazonaws.com/123456789012/orders-dlq" {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []string{"sqs:http://localhost:1/000/q", "sqs:ftp://h/q?region=r", "sqs:https://u:p@h/q?region=r",
		"sqs:https://h/q?region=r&visibility=1.5s", "sqs:https://h/q?region=r&wait=30s", "sqs:https://h/?region=r"} {
		if _, err := OpenEnv(bad, env); err == nil {
			t.Errorf("OpenEnv(%q) accepted", bad)
		}
	}
}

// A replay adds three stamps; SQS takes at most 10 message attributes
// (sqstest refuses more as SQS does). A message with 7 of its own goes
// (10 with the stamps); one with 8 is not sent at all, and the result
// says why, for the person who must decide; one that already carries the
// stamps (a second replay) replaces them and still fits.
func TestReplayStampsFitSQSAttributeLimit(t *testing.T) {
	b := newBundle(t, false)
	attrs := func(n int, extra ...string) map[string]types.MessageAttributeValue {
		m := map[string]types.MessageAttributeValue{}
		for i := range n {
			m[fmt.Sprint("a", i)] = str("v")
		}
		for _, k := range extra {
			m[k] = str("1")
		}
		return m
	}
	b.deadLetter(`{"o":7}`, attrs(7), "")
	b.deadLetter(`{"o":8}`, attrs(8), "")
	b.deadLetter(`{"o":"again"}`, attrs(7, brokermsg.HeaderKey, brokermsg.HeaderCount, brokermsg.HeaderLineage), "")
	byBody := map[string]entry.Entry{}
	for _, e := range readAll(t, b.conn) {
		byBody[e.ID] = e
		var env envelope
		if err := jsonUnmarshal(e.Payload, &env); err != nil {
			t.Fatal(err)
		}
		body, _ := env.Bytes()
		byBody[string(body)] = e
	}
	replay := func(body string) connector.Result {
		e := byBody[body]
		return b.conn.Replay(context.Background(), connector.Request{Entry: &e, Key: e.IdempotencyKey, Attempt: 1})
	}
	sends := b.srv.Calls("SendMessage")
	res := replay(`{"o":8}`)
	if res.Outcome != connector.Failed || !strings.Contains(res.Detail, "8 message attributes") || !strings.Contains(res.Detail, "limit of 10") {
		t.Errorf("8 attributes: %v %q, want failed (for a person) saying why", res.Outcome, res.Detail)
	}
	if n := b.srv.Calls("SendMessage") - sends; n != 0 {
		t.Errorf("8 attributes: %d SendMessage calls, want none", n)
	}
	for _, body := range []string{`{"o":7}`, `{"o":"again"}`} {
		if res := replay(body); res.Outcome != connector.Succeeded {
			t.Errorf("%s: %v %s", body, res.Outcome, res.Detail)
		}
	}
	for _, m := range b.srv.Messages(b.src) {
		if len(m.Attributes) != 10 || m.Attributes[brokermsg.HeaderKey].StringValue == nil {
			t.Errorf("replayed %s with %d attributes, want its 7 and the 3 stamps", m.Body, len(m.Attributes))
		}
	}
}
