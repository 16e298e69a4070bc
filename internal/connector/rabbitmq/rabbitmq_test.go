package rabbitmq

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/testsvc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testsvc.Stop()
	os.Exit(code)
}

var queueSeq atomic.Int64

// bundle is one test's topology on the shared server: a work queue whose
// dead letters go (default exchange) to its DLQ, as the RabbitMQ docs'
// dead-letter example sets it up (https://www.rabbitmq.com/docs/dlx).
type bundle struct {
	t          *testing.T
	url        string
	conn       *amqp.Connection
	ch         *amqp.Channel
	work, dlq  string
	other      string // a second queue bound to the same exchange
	exchange   string
	connSpec   string
	connection *Conn
}

func newBundle(t *testing.T, workArgs amqp.Table) *bundle {
	t.Helper()
	u := testsvc.RabbitMQ(t)
	n := queueSeq.Add(1)
	b := &bundle{t: t, url: u, work: fmt.Sprintf("orders-%d-%d", os.Getpid(), n)}
	b.dlq, b.other, b.exchange = b.work+".dlq", b.work+".audit", b.work+".x"
	var err error
	if b.conn, err = amqp.Dial(u); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.conn.Close() })
	if b.ch, err = b.conn.Channel(); err != nil {
		t.Fatal(err)
	}
	args := amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": b.dlq}
	for k, v := range workArgs {
		args[k] = v
	}
	must(t, b.ch.ExchangeDeclare(b.exchange, "fanout", false, true, false, false, nil))
	for _, q := range []struct {
		name string
		args amqp.Table
	}{{b.dlq, nil}, {b.work, args}, {b.other, nil}} {
		if _, err := b.ch.QueueDeclare(q.name, false, false, false, false, q.args); err != nil {
			t.Fatal(err)
		}
	}
	must(t, b.ch.QueueBind(b.work, "", b.exchange, false, nil))
	must(t, b.ch.QueueBind(b.other, "", b.exchange, false, nil))
	t.Cleanup(func() {
		if ch, err := b.conn.Channel(); err == nil {
			for _, q := range []string{b.work, b.dlq, b.other} {
				_, _ = ch.QueueDelete(q, false, false, false)
			}
		}
	})
	b.connSpec = "rabbitmq:" + strings.TrimSuffix(u, "/") + "/?queue=" + b.dlq + "&wait=500ms"
	if b.connection, err = Open(b.connSpec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.connection.Close() })
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// publish sends to the exchange (both bound queues get a copy).
func (b *bundle) publish(msg amqp.Publishing) {
	b.t.Helper()
	must(b.t, b.ch.PublishWithContext(context.Background(), b.exchange, "", false, false, msg))
}

// rejectAll plays the failing consumer of the work queue: it takes n
// messages and rejects them without requeue, so the broker dead-letters
// each with x-death reason "rejected".
func (b *bundle) rejectAll(n int) {
	b.t.Helper()
	for i := 0; i < n; i++ {
		d := b.get(b.work)
		must(b.t, d.Nack(false, false))
	}
}

// get waits for one message on q.
func (b *bundle) get(q string) amqp.Delivery {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, ok, err := b.ch.Get(q, false)
		must(b.t, err)
		if ok {
			return d
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("no message on %s", q)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bundle) count(q string) int {
	b.t.Helper()
	ch, err := b.conn.Channel()
	must(b.t, err)
	defer ch.Close()
	qq, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
	must(b.t, err)
	return qq.Messages
}

// waitCount waits until q holds n messages (dead-lettering is asynchronous).
func (b *bundle) waitCount(q string, n int) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.count(q) != n {
		if time.Now().After(deadline) {
			b.t.Fatalf("%s holds %d messages, want %d", q, b.count(q), n)
		}
		time.Sleep(20 * time.Millisecond)
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

const springStack = "org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: Listener method threw exception\n" +
	"\tat org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer.wrapToListenerExecutionFailedExceptionIfNeeded\n" +
	"Caused by: %s: %s\n\tat com.acme.OrderListener.handle(OrderListener.java:42)\n"

// Every way a message reaches a DLQ, and what the entry says of it.
func TestReadClassifiesDeadLetters(t *testing.T) {
	cases := []struct {
		name      string
		workArgs  amqp.Table
		msg       amqp.Publishing
		reject    bool
		wantCode  string
		wantMsg   string // substring of Message ("" = must be empty)
		wantDeath string
	}{
		{name: "rejected with a socket timeout in the stack", reject: true,
			msg: amqp.Publishing{MessageId: "m1", Body: []byte(`{"order":1}`), Headers: amqp.Table{
				"x-exception-message":    "Listener method threw exception",
				"x-exception-stacktrace": fmt.Sprintf(springStack, "java.net.SocketTimeoutException", "Read timed out")}},
			wantCode: brokermsg.CodeTimeout, wantMsg: "Listener method", wantDeath: "rejected"},
		{name: "rejected with a JSON parse error", reject: true,
			msg: amqp.Publishing{MessageId: "m2", Body: []byte(`{"order":`), Headers: amqp.Table{
				"x-exception-message":    "Unexpected end-of-input",
				"x-exception-stacktrace": fmt.Sprintf(springStack, "com.fasterxml.jackson.core.JsonParseException", "Unexpected end-of-input")}},
			wantCode: brokermsg.CodeParse, wantMsg: "Unexpected end-of-input", wantDeath: "rejected"},
		{name: "rejected with access denied", reject: true,
			msg: amqp.Publishing{MessageId: "m3", Body: []byte(`{}`), Headers: amqp.Table{
				"x-exception-stacktrace": fmt.Sprintf(springStack, "org.springframework.security.access.AccessDeniedException", "Access is denied")}},
			wantCode: brokermsg.CodeDenied, wantMsg: "ListenerExecutionFailedException", wantDeath: "rejected"},
		// A consumer's reject alone says nothing: unrecognised, and the
		// message stays empty even though the queue is called "timeout".
		{name: "rejected without an application error", reject: true,
			msg:      amqp.Publishing{MessageId: "m4", Body: []byte(`{"order":4}`)},
			wantCode: "rejected", wantDeath: "rejected"},
		{name: "rejected with an unknown exception", reject: true,
			msg: amqp.Publishing{MessageId: "m5", Body: []byte(`{}`), Headers: amqp.Table{
				"x-exception-message": "order 17 has no customer"}},
			wantCode: "rejected", wantMsg: "no customer", wantDeath: "rejected"},
		{name: "expired in the work queue", workArgs: amqp.Table{"x-message-ttl": int32(1)},
			msg:      amqp.Publishing{MessageId: "m6", Body: []byte(`{"order":6}`)},
			wantCode: brokermsg.CodeTimeout, wantMsg: "expired", wantDeath: "expired"},
		{name: "dropped by max-length", workArgs: amqp.Table{"x-max-length": int32(1)},
			msg:      amqp.Publishing{MessageId: "m7", Body: []byte{0xff, 0x00, 0xfe}},
			wantCode: "resource_exhausted", wantMsg: "maxlen", wantDeath: "maxlen"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBundle(t, c.workArgs)
			b.publish(c.msg)
			if c.workArgs["x-max-length"] != nil {
				b.publish(amqp.Publishing{MessageId: "pusher", Body: []byte("x")}) // pushes the first out
			}
			if c.reject {
				b.rejectAll(1)
			}
			b.waitCount(b.dlq, 1)
			got := readAll(t, b.connection)
			if len(got) != 1 {
				t.Fatalf("read %d entries, want 1", len(got))
			}
			e := got[0]
			if e.ReasonCode != c.wantCode {
				t.Errorf("ReasonCode = %q, want %q", e.ReasonCode, c.wantCode)
			}
			if c.wantMsg == "" && e.Message != "" || !strings.Contains(e.Message, c.wantMsg) {
				t.Errorf("Message = %q, want it to contain %q", e.Message, c.wantMsg)
			}
			if e.Labels["rabbitmq.death_reason"] != c.wantDeath || e.Topic != b.work {
				t.Errorf("labels %v topic %q, want death %q from %s", e.Labels, e.Topic, c.wantDeath, b.work)
			}
			if e.ID != c.msg.MessageId+"#1" || e.Source != Kind || e.Scope != b.dlq || e.Attempts != 1 {
				t.Errorf("entry id %q source %q scope %q attempts %d", e.ID, e.Source, e.Scope, e.Attempts)
			}
			msg, q, err := decodeEnvelope(&e)
			if err != nil || string(msg.Body) != string(c.msg.Body) || q != b.work {
				t.Errorf("envelope body %q queue %q (%v), want %q %q", msg.Body, q, err, c.msg.Body, b.work)
			}
			if e.FirstFailure.IsZero() {
				t.Error("no first failure time from x-death")
			}
		})
	}
}

// A message is acked in the DLQ only once its entry is stored: read but
// not stored, it comes back; stored, it is gone.
func TestAckOnlyAfterStored(t *testing.T) {
	b := newBundle(t, nil)
	for i := range 3 {
		b.publish(amqp.Publishing{MessageId: fmt.Sprint("s", i), Body: []byte(`{}`)})
	}
	b.rejectAll(3)
	b.waitCount(b.dlq, 3)
	got := readAll(t, b.connection)
	if len(got) != 3 {
		t.Fatalf("read %d, want 3", len(got))
	}
	notes := strings.Join(b.connection.Notes(), "\n")
	if !strings.Contains(notes, "held 3 messages") || !strings.Contains(notes, "read 3 of 3") {
		t.Errorf("notes do not say what the queue held and what was read:\n%s", notes)
	}
	must(t, b.connection.ack(context.Background(), &got[0]))
	must(t, b.connection.ack(context.Background(), &got[0])) // idempotent
	// A run killed now: its connection ends, the broker requeues the
	// two messages never stored.
	must(t, b.connection.Close())
	b.waitCount(b.dlq, 2)
	again, err := Open(b.connSpec)
	must(t, err)
	defer again.Close()
	rest := readAll(t, again)
	if len(rest) != 2 || rest[0].ID == got[0].ID || rest[1].ID == got[0].ID {
		t.Fatalf("second read %v, want the two unstored entries", ids(rest))
	}
	for _, e := range rest {
		if e.IdempotencyKey != keyOf(got, e.ID) {
			t.Errorf("%s: key %s changed between reads", e.ID, e.IdempotencyKey)
		}
	}
}

func ids(es []entry.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

func keyOf(es []entry.Entry, id string) string {
	for _, e := range es {
		if e.ID == id {
			return e.IdempotencyKey
		}
	}
	return ""
}

// Replay goes to the queue that dead-lettered the message, not to the
// exchange (the other bound queue gets no second copy), with its headers,
// the idempotency key and the replay count; a replay that fails again
// returns linked to its ancestor.
func TestReplayToDeadLetteringQueueAndLineage(t *testing.T) {
	b := newBundle(t, nil)
	b.publish(amqp.Publishing{MessageId: "r1", ContentType: "application/json", Body: []byte(`{"order":1}`),
		Headers: amqp.Table{"tenant": "acme", "attempt": int32(3)}})
	_ = b.get(b.other) // the audit queue's own copy, taken away
	b.rejectAll(1)
	b.waitCount(b.dlq, 1)
	e := readAll(t, b.connection)[0]
	must(t, b.connection.ack(context.Background(), &e))
	res := b.connection.Replay(context.Background(), connector.Request{Entry: &e, Key: e.IdempotencyKey, Attempt: 1})
	if res.Outcome != connector.Succeeded {
		t.Fatalf("replay: %v %s", res.Outcome, res.Detail)
	}
	if n := b.count(b.other); n != 0 {
		t.Errorf("the other queue bound to the exchange got %d copies", n)
	}
	d := b.get(b.work)
	if string(d.Body) != `{"order":1}` || d.ContentType != "application/json" || d.MessageId != "r1" {
		t.Errorf("replayed message %q %q %q", d.Body, d.ContentType, d.MessageId)
	}
	if d.Headers["tenant"] != "acme" || d.Headers["attempt"] != int32(3) {
		t.Errorf("headers not kept with their types: %#v", d.Headers)
	}
	if d.Headers[brokermsg.HeaderKey] != e.IdempotencyKey || d.Headers[brokermsg.HeaderCount] != "1" {
		t.Errorf("stamps: %v %v", d.Headers[brokermsg.HeaderKey], d.Headers[brokermsg.HeaderCount])
	}
	// It fails again.
	must(t, d.Nack(false, false))
	b.waitCount(b.dlq, 1)
	back := readAll(t, b.connection)[0]
	if back.ID == e.ID || back.Ref() == e.Ref() {
		t.Fatalf("the returning message has its ancestor's id %s", back.ID)
	}
	if back.Labels[brokermsg.LabelReplayOf] != e.IdempotencyKey || back.Labels[brokermsg.LabelReplayCount] != "1" {
		t.Errorf("returning entry labels %v, want replay_of %s count 1", back.Labels, e.IdempotencyKey)
	}
	if back.IdempotencyKey == e.IdempotencyKey {
		t.Error("the returning entry shares its ancestor's key: the ledger would skip it as committed")
	}
	res = b.connection.Replay(context.Background(), connector.Request{Entry: &back, Key: back.IdempotencyKey, Attempt: 1})
	if res.Outcome != connector.Succeeded {
		t.Fatalf("second replay: %v %s", res.Outcome, res.Detail)
	}
	if d := b.get(b.work); d.Headers[brokermsg.HeaderCount] != "2" {
		t.Errorf("second replay's count %v, want 2", d.Headers[brokermsg.HeaderCount])
	}
}

func TestReplayOutcomes(t *testing.T) {
	b := newBundle(t, nil)
	b.publish(amqp.Publishing{MessageId: "o1", Body: []byte(`{}`)})
	b.rejectAll(1)
	b.waitCount(b.dlq, 1)
	e := readAll(t, b.connection)[0]

	// The queue that dead-lettered it is gone: the broker returns it.
	gone := e
	gone.Payload = []byte(strings.Replace(string(e.Payload), `"replay_queue":"`+b.work, `"replay_queue":"`+b.work+"-deleted", 1))
	if res := b.connection.Replay(context.Background(), connector.Request{Entry: &gone, Key: "k"}); res.Outcome != connector.Failed || res.Status != 312 {
		t.Errorf("replay to a missing queue: %v %d %s", res.Outcome, res.Status, res.Detail)
	}
	// The publisher channel survives a return: the next replay works.
	if res := b.connection.Replay(context.Background(), connector.Request{Entry: &e, Key: "k"}); res.Outcome != connector.Succeeded {
		t.Errorf("replay after a return: %v %s", res.Outcome, res.Detail)
	}
	bad := e
	bad.Payload = []byte(`"not an envelope"`)
	if res := b.connection.Replay(context.Background(), connector.Request{Entry: &bad, Key: "k"}); res.Outcome != connector.Failed {
		t.Errorf("replay of a foreign payload: %v", res.Outcome)
	}
	// A broker that is not there: not sent, and the target is down.
	down, err := Open(fmt.Sprintf("rabbitmq:amqp://guest:guest@127.0.0.1:%d/?queue=q", testsvc.FreePort(t)))
	must(t, err)
	if res := down.Replay(context.Background(), connector.Request{Entry: &e, Key: "k"}); res.Outcome != connector.NotSent || !res.TargetDown {
		t.Errorf("replay to a broker that is down: %v %v %s", res.Outcome, res.TargetDown, res.Detail)
	}
}

func TestSpecAndSecrets(t *testing.T) {
	env := map[string]string{"RABBITMQ_USERNAME": "ops", "RABBITMQ_PASSWORD": "hunter2-secret"}
	c, err := OpenEnv("rabbitmq:amqp://broker:5672/prod?queue=orders.dlq&prefetch=50", func(k string) string { return env[k] })
	must(t, err)
	if c.prefetch != 50 || c.queue != "orders.dlq" || !strings.Contains(c.dialURL, "ops:hunter2-secret@") {
		t.Errorf("parsed %+v", c)
	}
	c2, err := OpenEnv("rabbitmq:amqp://u:pa55word-xyz@127.0.0.1:1/prod?queue=q", func(string) string { return "" })
	must(t, err)
	for _, s := range []string{c.String(), c.Origin(), c2.String(), c2.Origin()} {
		if strings.Contains(s, "hunter2") || strings.Contains(s, "pa55word") {
			t.Errorf("a secret in %q", s)
		}
	}
	for e, err := range c2.Entries(context.Background()) {
		if err == nil || strings.Contains(err.Error(), "pa55word") {
			t.Errorf("read of a closed port: %v %v", e, err)
		}
	}
	if back, err := OpenEnv(c.Origin(), func(k string) string { return env[k] }); err != nil || back.queue != "orders.dlq" {
		t.Errorf("Origin %q does not open again: %v", c.Origin(), err)
	}
	for _, bad := range []string{"rabbitmq:amqp://h/", "rabbitmq:http://h/?queue=q", "rabbitmq:amqp://h/?queue=q&prefetch=0", "rabbitmq:amqp://h/?queue=q&wait=x"} {
		if _, err := Open(bad); err == nil {
			t.Errorf("Open(%q) accepted", bad)
		}
	}
}

func TestTableRoundTrip(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := amqp.Table{"s": "x", "b": true, "n": nil, "i8": int8(-1), "u8": uint8(2), "i16": int16(3), "i32": int32(4),
		"i64": int64(5), "f32": float32(1.5), "f64": 2.5, "bin": []byte{0xff}, "ts": ts,
		"dec": amqp.Decimal{Scale: 2, Value: 314}, "tbl": amqp.Table{"count": int64(2)}, "arr": []any{"a", int32(1)}}
	enc, err := encodeTable(in)
	must(t, err)
	e := entry.Entry{}
	env := envelope{Body: brokermsg.NewBody([]byte("b")), Headers: enc}
	p, err := jsonMarshal(env)
	must(t, err)
	e.Payload = p
	msg, _, err := decodeEnvelope(&e)
	must(t, err)
	if fmt.Sprintf("%#v", msg.Headers) != fmt.Sprintf("%#v", in) {
		t.Errorf("headers changed:\n got %#v\nwant %#v", msg.Headers, in)
	}
}

// TestMarshalEnvelopeDecodesAsMarshal: the envelope with its body spliced
// in by hand decodes to what json.Marshal of the same envelope does.
func TestMarshalEnvelopeDecodesAsMarshal(t *testing.T) {
	enc, err := encodeTable(amqp.Table{"x-exception-message": "a \"quoted\" <b>", "n": int64(3)})
	must(t, err)
	for _, body := range [][]byte{nil, {}, []byte(`{"order":1,"note":"tab\there"}`), {0xff, 0x00}} {
		env := envelope{Headers: enc, Exchange: "ex", RoutingKey: "rk", ReplayQueue: "orders",
			Properties: properties{ContentType: "application/json", MessageID: "m1", DeliveryMode: 2}}
		got, err := marshalEnvelope(body, &env)
		must(t, err)
		env.Body = brokermsg.NewBody(body)
		want, err := jsonMarshal(env)
		must(t, err)
		var a, b envelope
		must(t, json.Unmarshal(got, &a))
		must(t, json.Unmarshal(want, &b))
		ab, errA := a.Body.Bytes()
		bb, errB := b.Body.Bytes()
		a.Body, b.Body = brokermsg.Body{}, brokermsg.Body{}
		if string(ab) != string(bb) || (errA == nil) != (errB == nil) || fmt.Sprintf("%#v", a) != fmt.Sprintf("%#v", b) {
			t.Errorf("body %q:\n ours %s\n json %s", body, got, want)
		}
	}
}

// TestPipelinedReplaysMatchTheirReturns: replays share one confirm channel
// with many in flight, and a basic.return names no delivery tag. Forty
// replays at once, every third to a queue that is gone: each of those
// (and only those) fails with the broker's 312 NO_ROUTE, every other one
// is confirmed and in the work queue.
func TestPipelinedReplaysMatchTheirReturns(t *testing.T) {
	b := newBundle(t, nil)
	b.publish(amqp.Publishing{MessageId: "p1", Body: []byte(`{}`)})
	b.rejectAll(1)
	b.waitCount(b.dlq, 1)
	e := readAll(t, b.connection)[0]
	gone := e
	gone.Payload = []byte(strings.Replace(string(e.Payload), `"replay_queue":"`+b.work, `"replay_queue":"`+b.work+"-deleted", 1))
	const n = 40
	res := make([]connector.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			en := &e
			if i%3 == 0 {
				en = &gone
			}
			res[i] = b.connection.Replay(context.Background(), connector.Request{Entry: en, Key: fmt.Sprintf("k-%d", i), Attempt: 1})
		}()
	}
	wg.Wait()
	sent := 0
	for i, r := range res {
		switch {
		case i%3 == 0 && (r.Outcome != connector.Failed || r.Status != 312):
			t.Errorf("replay %d to the missing queue: %v %d %s", i, r.Outcome, r.Status, r.Detail)
		case i%3 != 0 && r.Outcome != connector.Succeeded:
			t.Errorf("replay %d: %v %s", i, r.Outcome, r.Detail)
		case i%3 != 0:
			sent++
		}
	}
	b.waitCount(b.work, sent)
	// The same key twice at once: one after the other, both confirmed.
	var twice [2]connector.Result
	for i := range twice {
		wg.Add(1)
		go func() {
			defer wg.Done()
			twice[i] = b.connection.Replay(context.Background(), connector.Request{Entry: &e, Key: "k-same", Attempt: 1})
		}()
	}
	wg.Wait()
	for i, r := range twice {
		if r.Outcome != connector.Succeeded {
			t.Errorf("replay %d of one key: %v %s", i, r.Outcome, r.Detail)
		}
	}
}
