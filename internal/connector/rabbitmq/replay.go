package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/entry"
)

// publisher is one confirm-mode channel. Publishes on it are serialised:
// with one message in flight, a basic.return read before its confirm is
// that message's (the broker sends the return first, and the client
// delivers frames in order). A Conn keeps a few, so replays in parallel
// (--max-parallel) do not queue behind one confirm.
type publisher struct {
	mu      sync.Mutex
	ch      *amqp.Channel
	returns chan amqp.Return
}

func (p *publisher) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetLocked()
}

func (p *publisher) resetLocked() {
	if p.ch != nil {
		_ = p.ch.Close()
	}
	p.ch, p.returns = nil, nil
}

// publishers is how many confirm channels a Conn opens at most, on one
// connection.
const publishers = 8

// pubConnection is the connection the publisher channels share.
func (c *Conn) pubConnection() (*amqp.Connection, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pconn != nil && !c.pconn.IsClosed() {
		return c.pconn, nil
	}
	conn, err := c.dial()
	if err != nil {
		return nil, err
	}
	c.pconn = conn
	return conn, nil
}

func (c *Conn) openPublisher(p *publisher) error {
	if p.ch != nil && !p.ch.IsClosed() {
		return nil
	}
	p.resetLocked()
	conn, err := c.pubConnection()
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		if ch != nil {
			ch.Close()
		}
		return errors.New(c.redact(err.Error()))
	}
	p.ch = ch
	p.returns = ch.NotifyReturn(make(chan amqp.Return, 1))
	return nil
}

// decodeEnvelope reads an entry's payload back into the message to send.
func decodeEnvelope(e *entry.Entry) (amqp.Publishing, string, error) {
	var env struct {
		brokermsg.Body
		Headers     map[string]json.RawMessage `json:"headers"`
		Properties  properties                 `json:"properties"`
		ReplayQueue string                     `json:"replay_queue"`
	}
	if err := json.Unmarshal(e.Payload, &env); err != nil {
		return amqp.Publishing{}, "", fmt.Errorf("payload is not a rabbitmq message envelope: %w", err)
	}
	body, err := env.Bytes()
	if err != nil {
		return amqp.Publishing{}, "", err
	}
	headers, err := decodeTable(env.Headers)
	if err != nil {
		return amqp.Publishing{}, "", err
	}
	pr := env.Properties
	msg := amqp.Publishing{Headers: headers, ContentType: pr.ContentType, ContentEncoding: pr.ContentEncoding,
		DeliveryMode: pr.DeliveryMode, Priority: pr.Priority, CorrelationId: pr.CorrelationID, ReplyTo: pr.ReplyTo,
		Expiration: pr.Expiration, MessageId: pr.MessageID, Type: pr.Type, AppId: pr.AppID, Body: body}
	if pr.Timestamp != nil {
		msg.Timestamp = *pr.Timestamp
	}
	return msg, env.ReplayQueue, nil
}

// Replay publishes the message to the queue that dead-lettered it.
func (c *Conn) Replay(ctx context.Context, r connector.Request) connector.Result {
	msg, queue, err := decodeEnvelope(r.Entry)
	if err != nil {
		return connector.Result{Outcome: connector.Failed, Detail: "rabbitmq: " + err.Error()}
	}
	if queue == "" {
		return connector.Result{Outcome: connector.Failed,
			Detail: "rabbitmq: the message names no queue that dead-lettered it (no x-death): give a target in rules.yaml"}
	}
	if msg.Headers == nil {
		msg.Headers = amqp.Table{}
	}
	msg.Headers[brokermsg.HeaderKey] = r.Key
	msg.Headers[brokermsg.HeaderCount] = strconv.Itoa(brokermsg.NextCount(r.Entry.Labels))
	msg.Headers[brokermsg.HeaderLineage] = r.Entry.LineageStamp()

	p := <-c.pubs
	defer func() { c.pubs <- p }()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := c.openPublisher(p); err != nil {
		return connector.Result{Outcome: connector.NotSent, TargetDown: true, Detail: "rabbitmq: connect: " + err.Error()}
	}
	for len(p.returns) > 0 {
		<-p.returns // a return left by an earlier publish that failed
	}
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, msg)
	if err != nil {
		p.resetLocked()
		// The client writes the frames or returns an error before any
		// was written to a closed channel: nothing reached the broker.
		return connector.Result{Outcome: connector.NotSent, TargetDown: true, Detail: "rabbitmq: publish: " + c.redact(err.Error())}
	}
	wctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	acked, err := dc.WaitContext(wctx)
	if err != nil {
		p.resetLocked()
		return connector.Result{Outcome: connector.Unknown, TargetDown: true,
			Detail: fmt.Sprintf("rabbitmq: no publisher confirm for queue %s: %s (the broker may have the message)", queue, c.redact(err.Error()))}
	}
	select {
	case ret := <-p.returns:
		return connector.Result{Outcome: connector.Failed, Status: int(ret.ReplyCode),
			Detail: fmt.Sprintf("rabbitmq: queue %s did not take the message: %d %s (does the queue exist?)", queue, ret.ReplyCode, ret.ReplyText)}
	default:
	}
	if !acked {
		return connector.Result{Outcome: connector.Retry, Detail: "rabbitmq: the broker nacked the publish to queue " + queue}
	}
	return connector.Result{Outcome: connector.Succeeded, Detail: "rabbitmq: published to queue " + queue + ", confirmed"}
}
