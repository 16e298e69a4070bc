package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/entry"
)

// pipe is the confirm-mode channel replays share. Publishes on it are
// pipelined: up to maxInFlight wait for their confirms at once, and the
// broker confirms several with one basic.ack (multiple=true). Eight
// channels with one message in flight each cost an ack frame a message:
// the bench's replays were 0.57-0.70x of the bare client publishing the
// same messages, 8 at a time, on one channel (and the bare client on
// eight channels one at a time fell to the connector's rate).
//
// A basic.return names no delivery tag. The broker sends a mandatory
// message's return before its confirm, and amqp091-go hands the return
// to NotifyReturn (a buffered channel, written before the reader goes on)
// before it handles the confirm. So once a publish's confirm has arrived
// its return, if there was one, is in returns or already moved to
// returned by another publish, found by the Idempotency-Key header every
// replay carries; two replays with one key are never in flight at once.
type pipe struct {
	mu       sync.Mutex
	ch       *amqp.Channel
	conn     *amqp.Connection // ch's
	returns  chan amqp.Return
	returned map[retKey]amqp.Return   // returns drained, not yet claimed
	busy     map[string]chan struct{} // keys in flight; closed when done
	slots    chan struct{}            // bounds publishes in flight
	opening  *opening                 // the channel open in progress, if any
}

// opening is one open of the pipe's channel, shared by the replays that
// wait for it; done is closed once it ended, with err its failure.
type opening struct {
	done chan struct{}
	err  error
}

// retKey names a drained return by its channel's returns and its key: a
// return from a dropped channel (its publish gave up between the return
// and the confirm) must not be taken by the next publish of its key on a
// new channel, which would report a message the broker took as failed.
type retKey struct {
	rets chan amqp.Return
	key  string
}

// maxInFlight bounds the publishes awaiting a confirm on the pipe; the
// returns buffer holds that many, so the client never drops one (it
// gives up on a full listener after a timeout).
const maxInFlight = 64

func newPipe() *pipe {
	return &pipe{returned: map[retKey]amqp.Return{}, busy: map[string]chan struct{}{}, slots: make(chan struct{}, maxInFlight)}
}

// resetIf drops the channel if it is still ch (a later publish may have
// opened a new one). It closes nothing while it holds the lock: a close
// waits for the broker's close-ok, and a stalled broker sends none (the
// client gives up on its heartbeat, 30s on), which would hold every
// replay past its deadline. A channel that failed a publish is closed
// in the background. After a confirm that did not come (stall, or the
// caller gave up) the whole connection goes, at once (a deadline of now
// fails its close frame's write): a stalled connection would also hold
// the next channel's open, and one key's late return must not reach the
// next publish of that key. Everything in flight on it is then unknown.
func (c *Conn) resetIf(ch *amqp.Channel, dropConn bool) {
	p := c.pipe
	p.mu.Lock()
	if p.ch != ch || ch == nil {
		p.mu.Unlock()
		return
	}
	conn := p.conn
	p.ch, p.returns, p.conn = nil, nil, nil
	p.mu.Unlock()
	if !dropConn || conn == nil {
		go func() { _ = ch.Close() }()
		return
	}
	c.dropPub(conn)
}

// dropPub closes the publishers' connection at once (a deadline of now
// fails its close frame's write) and forgets it, if it is still conn.
func (c *Conn) dropPub(conn *amqp.Connection) {
	c.mu.Lock()
	if c.pconn == conn {
		c.pconn = nil
	}
	c.mu.Unlock()
	go func() { _ = conn.CloseDeadline(time.Now()) }()
}

// claim makes key this pipe's to publish; release gives it back.
func (p *pipe) claim(ctx context.Context, key string) (release func(), err error) {
	for {
		p.mu.Lock()
		wait, busy := p.busy[key]
		if !busy {
			done := make(chan struct{})
			p.busy[key] = done
			for k := range p.returned { // returns left by publishes that gave up
				if k.key == key {
					delete(p.returned, k)
				}
			}
			p.mu.Unlock()
			return func() {
				p.mu.Lock()
				delete(p.busy, key)
				p.mu.Unlock()
				close(done)
			}, nil
		}
		p.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// returnOf moves the returns that arrived to returned and takes key's.
func (p *pipe) returnOf(rets chan amqp.Return, key string) (amqp.Return, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for drained := false; !drained; {
		select {
		case r, ok := <-rets:
			if !ok {
				drained = true
				break
			}
			if k, _ := r.Headers[brokermsg.HeaderKey].(string); k != "" {
				p.returned[retKey{rets, k}] = r
			}
		default:
			drained = true
		}
	}
	r, ok := p.returned[retKey{rets, key}]
	delete(p.returned, retKey{rets, key})
	return r, ok
}

// pubConnection is the connection the publisher channels share. It dials
// outside the connector's lock, which the read and every Settle take: a
// broker that stalls the handshake would hold them until its deadline
// (the spec's timeout). Only the pipe's one open calls it at a time.
func (c *Conn) pubConnection() (*amqp.Connection, error) {
	c.mu.Lock()
	if c.pconn != nil && !c.pconn.IsClosed() {
		conn := c.pconn
		c.mu.Unlock()
		return conn, nil
	}
	closes := c.closes
	c.mu.Unlock()
	conn, err := c.dial()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closes != closes { // Close ran during the dial: it would not close this one
		go func() { _ = conn.Close() }()
		return nil, errors.New("the connector was closed")
	}
	if c.pconn != nil && !c.pconn.IsClosed() {
		go func() { _ = conn.Close() }()
		return c.pconn, nil
	}
	c.pconn = conn
	return conn, nil
}

// channel is the pipe's channel and its returns, opened when needed. One
// open runs at a time, outside the pipe's lock, and each replay waits for
// it no longer than its own ctx: a broker that stalls with the connection
// up answers no channel.open, and the client gives up only on its
// heartbeat (30s on), which held every replay queued on the lock past its
// deadline. An open that takes longer than the confirm timeout drops the
// connection, so the next replay dials afresh.
func (c *Conn) channel(ctx context.Context) (*amqp.Channel, chan amqp.Return, error) {
	p := c.pipe
	for {
		p.mu.Lock()
		if p.ch != nil && !p.ch.IsClosed() {
			ch, rets := p.ch, p.returns
			p.mu.Unlock()
			return ch, rets, nil
		}
		p.ch, p.returns, p.conn = nil, nil, nil
		if p.opening == nil {
			p.opening = &opening{done: make(chan struct{})}
			go c.open(p.opening)
		}
		op := p.opening
		p.mu.Unlock()
		select {
		case <-op.done:
			if op.err != nil {
				return nil, nil, op.err
			}
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("waiting for the publish channel to open: %w", ctx.Err())
		}
	}
}

// open opens the pipe's confirm-mode channel and installs it.
func (c *Conn) open(op *opening) {
	var ch *amqp.Channel
	conn, err := c.pubConnection()
	if err == nil {
		stall := time.AfterFunc(c.timeout, func() { c.dropPub(conn) })
		ch, err = conn.Channel()
		if err == nil {
			err = ch.Confirm(false)
		}
		stall.Stop()
		if err != nil {
			if ch != nil {
				go func() { _ = ch.Close() }() // waits for a close-ok
			}
			err = errors.New(c.redact(err.Error()))
		}
	}
	p := c.pipe
	p.mu.Lock()
	if err == nil {
		p.ch, p.conn = ch, conn
		p.returns = ch.NotifyReturn(make(chan amqp.Return, maxInFlight))
	}
	op.err, p.opening = err, nil
	p.mu.Unlock()
	close(op.done)
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

	if r.Key == "" {
		// The key names the message in a basic.return (and a replay
		// always carries one).
		return connector.Result{Outcome: connector.Failed, Detail: "rabbitmq: a replay without an idempotency key"}
	}
	release, err := c.pipe.claim(ctx, r.Key)
	if err != nil {
		return connector.Result{Outcome: connector.NotSent, Detail: "rabbitmq: " + err.Error()}
	}
	defer release()
	select {
	case c.pipe.slots <- struct{}{}:
		defer func() { <-c.pipe.slots }()
	case <-ctx.Done():
		return connector.Result{Outcome: connector.NotSent, Detail: "rabbitmq: " + ctx.Err().Error()}
	}
	ch, rets, err := c.channel(ctx)
	if err != nil {
		return connector.Result{Outcome: connector.NotSent, TargetDown: true, Detail: "rabbitmq: connect: " + err.Error()}
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, msg)
	if err != nil {
		c.resetIf(ch, false)
		// The client writes the frames or returns an error before any
		// was written to a closed channel: nothing reached the broker.
		return connector.Result{Outcome: connector.NotSent, TargetDown: true, Detail: "rabbitmq: publish: " + c.redact(err.Error())}
	}
	wctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	acked, err := dc.WaitContext(wctx)
	if err == nil && !acked && ch.IsClosed() {
		// The channel closed before the confirm (the client marks it
		// closed before it fails the confirms it was waiting for).
		err = errors.New("the channel closed")
	}
	if err != nil {
		c.resetIf(ch, true)
		return connector.Result{Outcome: connector.Unknown, TargetDown: true,
			Detail: fmt.Sprintf("rabbitmq: no publisher confirm for queue %s: %s (the broker may have the message)", queue, c.redact(err.Error()))}
	}
	if ret, ok := c.pipe.returnOf(rets, r.Key); ok {
		return connector.Result{Outcome: connector.Failed, Status: int(ret.ReplyCode),
			Detail: fmt.Sprintf("rabbitmq: queue %s did not take the message: %d %s (does the queue exist?)", queue, ret.ReplyCode, ret.ReplyText)}
	}
	if !acked {
		return connector.Result{Outcome: connector.Retry, Detail: "rabbitmq: the broker nacked the publish to queue " + queue}
	}
	return connector.Result{Outcome: connector.Succeeded, Detail: "rabbitmq: published to queue " + queue + ", confirmed"}
}
