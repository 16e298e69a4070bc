package rabbitmq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/entry"
)

// Kind is the source kind of the entries this connector reads.
const Kind = "rabbitmq"

// Defaults of the spec's options.
const (
	DefaultPrefetch = 1000
	DefaultWait     = 2 * time.Second
	DefaultTimeout  = 30 * time.Second
)

// Spring AMQP's RepublishMessageRecoverer headers (spring-amqp
// RepublishMessageRecoverer.java: X_EXCEPTION_STACKTRACE,
// X_EXCEPTION_MESSAGE, X_ORIGINAL_EXCHANGE, X_ORIGINAL_ROUTING_KEY).
const (
	hdrExceptionMessage = "x-exception-message"
	hdrExceptionStack   = "x-exception-stacktrace"
	hdrOriginalRouting  = "x-original-routingKey"
)

// Conn is one RabbitMQ dead-letter queue. It implements
// connector.Connector.
type Conn struct {
	spec     string // as given, password redacted
	origin   string // rabbitmq:amqp://HOST:PORT/VHOST?queue=Q, no credentials
	base     string // amqp://HOST:PORT/VHOST, no credentials
	dialURL  string // with credentials: never printed
	password string
	queue    string
	prefetch int
	wait     time.Duration
	timeout  time.Duration
	errHdr   string

	mu      sync.Mutex
	reader  *amqp.Connection
	pconn   *amqp.Connection     // the publishers' connection
	closes  int                  // Close calls, to tell a dial that Close ran
	held    map[string][]heldMsg // by entry ID, until stored
	acks    *acker               // the current read's
	notes   []string
	pipe    *pipe
	tagSeq  atomic.Int64
	dialCfg amqp.Config
}

var _ connector.Connector = (*Conn)(nil)

// Open parses a rabbitmq: spec; credentials missing from the URL come from
// the environment (RABBITMQ_USERNAME, RABBITMQ_PASSWORD).
func Open(spec string) (*Conn, error) { return OpenEnv(spec, os.Getenv) }

// OpenEnv is Open with the environment read through getenv.
func OpenEnv(spec string, getenv func(string) string) (*Conn, error) {
	rest, ok := strings.CutPrefix(spec, Kind+":")
	if !ok {
		return nil, fmt.Errorf("want %s:amqp://HOST:PORT/VHOST?queue=QUEUE", Kind)
	}
	u, err := url.Parse(rest)
	if err != nil {
		return nil, errors.New("not a URL: want " + Kind + ":amqp://HOST:PORT/VHOST?queue=QUEUE")
	}
	if u.Scheme != "amqp" && u.Scheme != "amqps" || u.Host == "" {
		return nil, fmt.Errorf("want an amqp:// or amqps:// URL with a host, got scheme %q", u.Scheme)
	}
	q := u.Query()
	c := &Conn{queue: q.Get("queue"), prefetch: DefaultPrefetch, wait: DefaultWait, timeout: DefaultTimeout,
		errHdr: q.Get("error_header"), held: map[string][]heldMsg{}, pipe: newPipe()}
	if c.queue == "" {
		return nil, errors.New("missing ?queue=QUEUE (the dead-letter queue to read)")
	}
	if v := q.Get("prefetch"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("prefetch=%q: want a number from 1 to 65535", v)
		}
		c.prefetch = n
	}
	for name, dst := range map[string]*time.Duration{"wait": &c.wait, "timeout": &c.timeout} {
		if v := q.Get(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%s=%q: want a positive duration such as 2s", name, v)
			}
			*dst = d
		}
	}
	user, pass := "", ""
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	if user == "" {
		user, pass = getenv("RABBITMQ_USERNAME"), getenv("RABBITMQ_PASSWORD")
	}
	c.password = pass
	for _, k := range []string{"queue", "prefetch", "wait", "timeout", "error_header"} {
		q.Del(k)
	}
	dial := *u
	dial.RawQuery = q.Encode() // the AMQP URI's own options (heartbeat, ...)
	dial.User = nil
	if user != "" {
		dial.User = url.UserPassword(user, pass)
	}
	c.dialURL = dial.String()
	if _, err := amqp.ParseURI(c.dialURL); err != nil {
		return nil, fmt.Errorf("bad AMQP URI: %s", c.redact(err.Error()))
	}
	plain := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath,
		RawQuery: url.Values{"queue": {c.queue}}.Encode()}
	c.origin = Kind + ":" + plain.String()
	plain.RawQuery = ""
	c.base = plain.String()
	shown := *u
	if shown.User != nil {
		if _, has := shown.User.Password(); has {
			shown.User = url.UserPassword(shown.User.Username(), "xxxxx")
		}
	}
	c.spec = Kind + ":" + shown.String()
	c.dialCfg = amqp.Config{
		Heartbeat: 10 * time.Second,
		Locale:    "en_US",
		// amqp091-go's own Dial bounds the handshake too (heartbeats
		// start only after it): a broker that accepts the connection and
		// never answers would otherwise hold a read or a replay for ever.
		// The client clears the deadline once the connection is open.
		Dial: func(network, addr string) (net.Conn, error) {
			conn, err := net.DialTimeout(network, addr, 10*time.Second)
			if err != nil {
				return nil, err
			}
			if err := conn.SetDeadline(time.Now().Add(min(c.timeout, 30*time.Second))); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		},
	}
	return c, nil
}

// String is the spec as given, with the password redacted.
func (c *Conn) String() string { return c.spec }

// Origin is where this connector's entries say they were read: the spec
// without credentials, which Open accepts again.
func (c *Conn) Origin() string { return c.origin }

// Destination names where a replay of e goes: the queue that dead-lettered
// it, on this broker and vhost. A run's breaker and --rate are per route,
// and a broker entry's route is its destination (issue 28).
func (c *Conn) Destination(e *entry.Entry) string {
	return Kind + ":" + c.base + "?" + url.Values{"queue": {e.Topic}}.Encode()
}

// Notes says how many messages the queue held and how many were read.
func (c *Conn) Notes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.notes)
}

func (c *Conn) note(format string, a ...any) {
	c.mu.Lock()
	c.notes = append(c.notes, fmt.Sprintf(format, a...))
	c.mu.Unlock()
}

// redact keeps the password out of a message from the client library.
func (c *Conn) redact(s string) string {
	if c.password != "" {
		s = strings.ReplaceAll(s, c.password, "xxxxx")
		s = strings.ReplaceAll(s, url.QueryEscape(c.password), "xxxxx")
	}
	return s
}

func (c *Conn) dial() (*amqp.Connection, error) {
	conn, err := amqp.DialConfig(c.dialURL, c.dialCfg)
	if err != nil {
		return nil, errors.New(c.redact(err.Error()))
	}
	return conn, nil
}

// Close ends the connections; deliveries not yet acked go back to the
// queue (the broker requeues them), to be read by the next run.
func (c *Conn) Close() error {
	c.mu.Lock()
	r, pc, acks := c.reader, c.pconn, c.acks
	c.reader, c.pconn, c.held, c.acks = nil, nil, map[string][]heldMsg{}, nil
	c.closes++
	c.mu.Unlock()
	var flushErr error
	if acks != nil {
		flushErr = acks.flush()
	}
	if pc != nil {
		_ = pc.Close()
	}
	c.pipe.mu.Lock()
	c.pipe.ch, c.pipe.returns, c.pipe.conn = nil, nil, nil // closed with pc
	c.pipe.mu.Unlock()
	if r != nil {
		if err := r.Close(); err != nil {
			return err
		}
	}
	if flushErr != nil {
		return fmt.Errorf("rabbitmq: ack in %s: %s (the messages not acked stay in the queue and are read again)", c.queue, c.redact(flushErr.Error()))
	}
	return nil
}

// Entries consumes the queue's messages as they stood when the read began.
func (c *Conn) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		fail := func(err error) {
			yield(entry.Entry{}, fmt.Errorf("rabbitmq queue %s: %s", c.queue, c.redact(err.Error())))
		}
		conn, err := c.dial()
		if err != nil {
			fail(err)
			return
		}
		c.mu.Lock()
		old := c.reader
		c.reader = conn
		c.mu.Unlock()
		if old != nil {
			old.Close() // its unacked deliveries go back to the queue
		}
		ch, err := conn.Channel()
		if err != nil {
			fail(err)
			return
		}
		acks := newAcker(ch.Ack, c.prefetch)
		c.mu.Lock()
		c.acks = acks
		c.mu.Unlock()
		if err := ch.Qos(c.prefetch, 0, false); err != nil {
			fail(err)
			return
		}
		q, err := ch.QueueDeclarePassive(c.queue, false, false, false, false, nil)
		if err != nil {
			fail(fmt.Errorf("the queue must exist: %w", err))
			return
		}
		held := q.Messages
		c.note("rabbitmq queue %s held %d messages when the read began", c.queue, held)
		if held == 0 {
			return
		}
		tag := fmt.Sprintf("replayctl-%d-%d", os.Getpid(), c.tagSeq.Add(1))
		deliveries, err := ch.Consume(c.queue, tag, false, false, false, false, nil)
		if err != nil {
			fail(err)
			return
		}
		read := 0
		defer func() {
			// Stop the consumer; what it had prefetched beyond the
			// messages read goes back to the queue now.
			_ = ch.Cancel(tag, false)
			for {
				select {
				case d, ok := <-deliveries:
					if !ok {
						return
					}
					_ = d.Nack(false, true)
				case <-time.After(200 * time.Millisecond):
					return
				}
			}
		}()
		idle := time.NewTimer(c.wait)
		defer idle.Stop()
		for read < held {
			select {
			case d, ok := <-deliveries:
				if !ok {
					fail(fmt.Errorf("the channel closed after %d of %d messages", read, held))
					return
				}
				e := c.entryOf(&d)
				acks.delivered(d.DeliveryTag)
				c.mu.Lock()
				c.held[e.ID] = append(c.held[e.ID], heldMsg{acks, d.DeliveryTag})
				c.mu.Unlock()
				read++
				if !yield(e, nil) {
					return
				}
				idle.Reset(c.wait)
			case <-idle.C:
				c.note("rabbitmq queue %s: read %d of %d messages: none came for %s (another consumer took them, or more than prefetch=%d wait unstored)",
					c.queue, read, held, c.wait, c.prefetch)
				return
			case <-ctx.Done():
				return
			}
		}
		c.note("rabbitmq queue %s: read %d of %d messages", c.queue, read, held)
	}
}

// Flush acks every stored message not acked yet (those a message never
// stored holds back): the runner calls it when a run ends.
func (c *Conn) Flush(context.Context) error {
	c.mu.Lock()
	acks := c.acks
	c.mu.Unlock()
	if acks == nil {
		return nil
	}
	if err := acks.flush(); err != nil {
		return fmt.Errorf("rabbitmq: ack in %s: %s (the messages not acked stay in the queue and are read again)", c.queue, c.redact(err.Error()))
	}
	return nil
}

// Stored acks the entry's message in the DLQ: the store has it now, so
// the broker's retention can no longer lose it. A failed ack is noted;
// the message stays in the queue and is read again.
func (c *Conn) Stored(ctx context.Context, e *entry.Entry) {
	if err := c.ack(ctx, e); err != nil {
		c.note("%s", err)
	}
}

func (c *Conn) ack(_ context.Context, e *entry.Entry) error {
	if e.Source != Kind || e.Scope != c.queue {
		return nil
	}
	c.mu.Lock()
	hs := c.held[e.ID]
	delete(c.held, e.ID)
	c.mu.Unlock()
	for len(hs) > 0 {
		a := hs[0].a
		var tags []uint64
		rest := hs[:0]
		for _, h := range hs {
			if h.a == a {
				tags = append(tags, h.tag)
			} else {
				rest = append(rest, h)
			}
		}
		hs = rest
		if err := a.done(tags); err != nil {
			return fmt.Errorf("rabbitmq: ack %s in %s: %s (it stays in the queue and is read again)", e.ID, c.queue, c.redact(err.Error()))
		}
	}
	return nil
}

// Settle acks the entry's message if this run still holds it. Acked
// already when stored, it has nothing left to do: settling is idempotent.
func (c *Conn) Settle(ctx context.Context, e *entry.Entry, _ connector.Settlement) error {
	return c.ack(ctx, e)
}

// ProbeEntry cannot tell: a published message cannot be looked up in a
// queue without consuming it.
func (c *Conn) ProbeEntry(context.Context, *entry.Entry) (connector.ProbeResult, string) {
	return connector.ProbeInconclusive, "rabbitmq: a queue cannot be searched for a message without consuming it"
}

// Ref names the message and its queue.
func (c *Conn) Ref(e *entry.Entry) connector.Link {
	id, _, _ := strings.Cut(e.ID, "#")
	return connector.Link{Name: "message " + id + " in queue " + e.Scope}
}

// Codes lists the reason codes the connector writes.
func (c *Conn) Codes() []connector.Code {
	const dlx = "https://www.rabbitmq.com/docs/dlx (x-death reason)"
	return append([]connector.Code{
		{Code: brokermsg.CodeTimeout, Class: "transient", Where: dlx + ": expired, the message TTL ran out before any consumer took it"},
		{Code: "resource_exhausted", Class: "transient", Where: dlx + ": maxlen, the queue was full"},
		{Code: "rejected", Class: "unrecognised", Where: dlx + ": rejected without an application error: unrecognised"},
		{Code: "delivery_limit", Class: "unrecognised", Where: dlx + ": delivery_limit without an application error: unrecognised"},
	}, brokermsg.ExceptionCodes("Spring AMQP x-exception-message / x-exception-stacktrace")...)
}

// death is the most recent x-death record and the totals over all of them.
type death struct {
	reason, queue, exchange string
	count                   int64
	first, last             time.Time
}

func deaths(h amqp.Table) death {
	var d death
	list, _ := h["x-death"].([]any)
	for i, item := range list {
		t, ok := item.(amqp.Table)
		if !ok {
			continue
		}
		if n, ok := toInt(t["count"]); ok {
			d.count += n
		}
		if i == 0 { // most recent first
			d.reason, _ = t["reason"].(string)
			d.queue, _ = t["queue"].(string)
			d.exchange, _ = t["exchange"].(string)
		}
		if ts, ok := t["time"].(time.Time); ok {
			if d.first.IsZero() || ts.Before(d.first) {
				d.first = ts
			}
			if ts.After(d.last) {
				d.last = ts
			}
		}
	}
	if d.reason == "" {
		d.reason, _ = h["x-first-death-reason"].(string)
		d.queue, _ = h["x-first-death-queue"].(string)
		d.exchange, _ = h["x-first-death-exchange"].(string)
	}
	return d
}

func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	case int16:
		return int64(n), true
	case int8:
		return int64(n), true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	}
	return 0, false
}

func headerString(h amqp.Table, name string) string {
	switch v := h[name].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

// envelope is an entry's payload: the message as the DLQ held it.
type envelope struct {
	brokermsg.Body
	Headers     map[string]any `json:"headers,omitempty"`
	Properties  properties     `json:"properties"`
	Exchange    string         `json:"exchange"`
	RoutingKey  string         `json:"routing_key"`
	ReplayQueue string         `json:"replay_queue,omitempty"`
}

type properties struct {
	ContentType     string     `json:"content_type,omitempty"`
	ContentEncoding string     `json:"content_encoding,omitempty"`
	DeliveryMode    uint8      `json:"delivery_mode,omitempty"`
	Priority        uint8      `json:"priority,omitempty"`
	CorrelationID   string     `json:"correlation_id,omitempty"`
	ReplyTo         string     `json:"reply_to,omitempty"`
	Expiration      string     `json:"expiration,omitempty"`
	MessageID       string     `json:"message_id,omitempty"`
	Timestamp       *time.Time `json:"timestamp,omitempty"`
	Type            string     `json:"type,omitempty"`
	UserID          string     `json:"user_id,omitempty"`
	AppID           string     `json:"app_id,omitempty"`
}

// maxMessage bounds an entry's Message; the whole error stays in the payload.
const maxMessage = 2000

// entryOf maps a delivery to an entry. Nothing here can fail on the
// message's content: a header of a type the envelope cannot keep makes
// the entry undecodable, still yielded with the body kept.
func (c *Conn) entryOf(d *amqp.Delivery) entry.Entry {
	h := d.Headers
	dt := deaths(h)
	msgID := d.MessageId
	if msgID == "" {
		sum := sha256.New()
		sum.Write(d.Body)
		fmt.Fprintf(sum, "\x00%s\x00%s\x00%v", d.Exchange, d.RoutingKey, h["x-death"])
		msgID = "sha256:" + hex.EncodeToString(sum.Sum(nil))[:32]
	}
	// The replay count replayctl stamped on a message it replayed (a
	// string, or a number from another client).
	key, count := headerString(h, brokermsg.HeaderKey), headerString(h, brokermsg.HeaderCount)
	if count == "" {
		if n, ok := toInt(h[brokermsg.HeaderCount]); ok {
			count = strconv.FormatInt(n, 10)
		}
	}
	_, stamped := h[brokermsg.HeaderCount]
	id := msgID + "#" + strconv.FormatInt(dt.count, 10)
	if n, err := strconv.ParseInt(strings.TrimSpace(count), 10, 64); stamped && err == nil {
		// A replay's return: RabbitMQ 3.13.0-3.13.2 and 4.x no longer
		// count a dead-lettering in an x-death header the publisher sent
		// (rabbitmq/rabbitmq-server#11331; spring-cloud-stream#3019), so
		// a replayed message that fails again can come back with the
		// count it left with, and the id of the entry it was replayed
		// from. replayctl's replay count tells the returns apart.
		id += "#r" + strconv.FormatInt(n, 10)
	}
	e := entry.Entry{
		ID:       id,
		Source:   Kind,
		Scope:    c.queue,
		Origin:   c.origin,
		Attempts: int(dt.count),
	}
	replayQueue := dt.queue
	if replayQueue == "" {
		// Spring's RepublishMessageRecoverer sends to a DLQ by itself
		// (no x-death): the original routing key is its best guess.
		replayQueue = headerString(h, hdrOriginalRouting)
	}
	e.Topic = replayQueue
	e.FirstFailure, e.LastFailure = dt.first.UTC(), dt.last.UTC()
	if e.FirstFailure.IsZero() && !d.Timestamp.IsZero() {
		e.FirstFailure, e.LastFailure = d.Timestamp.UTC(), d.Timestamp.UTC()
	}

	appMsg := headerString(h, hdrExceptionMessage)
	stack := headerString(h, hdrExceptionStack)
	if c.errHdr != "" && appMsg == "" {
		appMsg = headerString(h, c.errHdr)
	}
	if appMsg == "" && stack != "" {
		appMsg, _, _ = strings.Cut(stack, "\n")
	}
	switch dt.reason {
	case "expired":
		// Never processed: its TTL ran out in the queue.
		e.ReasonCode = brokermsg.CodeTimeout
		e.Message = "x-death: expired in queue " + dt.queue + " before any consumer took it"
	case "maxlen":
		e.ReasonCode = "resource_exhausted"
		e.Message = "x-death: maxlen: queue " + dt.queue + " was full"
	default:
		// rejected, delivery_limit, or no x-death: a consumer refused it,
		// which says nothing of why; the application's error decides.
		// Without one the message stays empty (a queue name could match
		// a pattern) and the code is unknown to the taxonomy:
		// unrecognised, never auto-replayed.
		e.ReasonCode = brokermsg.ExceptionCode(nil, appMsg, stack)
		if e.ReasonCode == "" {
			e.ReasonCode = dt.reason
		}
		e.Message = brokermsg.Excerpt(appMsg, maxMessage)
	}
	labels := map[string]string{"rabbitmq.dlq": c.queue}
	if dt.reason != "" {
		labels["rabbitmq.death_reason"] = dt.reason
	}
	if dt.queue != "" {
		labels["rabbitmq.death_queue"] = dt.queue
	}
	if dt.exchange != "" {
		labels["rabbitmq.death_exchange"] = dt.exchange
	}
	if stamped {
		labels = brokermsg.SetLineage(labels, key, count)
	} else if key != "" {
		// The application's own key, never replayed by replayctl:
		// preserved exactly.
		e.IdempotencyKey = key
	}
	brokermsg.ReadLineage(&e, headerString(h, brokermsg.HeaderLineage))
	e.Labels = labels
	if e.IdempotencyKey == "" {
		e.IdempotencyKey, e.KeyDerived = entry.DeriveKey(Kind, c.queue+"/"+e.ID), true
	}

	env := envelope{Exchange: d.Exchange, RoutingKey: d.RoutingKey, ReplayQueue: replayQueue,
		Properties: properties{ContentType: d.ContentType, ContentEncoding: d.ContentEncoding, DeliveryMode: d.DeliveryMode,
			Priority: d.Priority, CorrelationID: d.CorrelationId, ReplyTo: d.ReplyTo, Expiration: d.Expiration,
			MessageID: d.MessageId, Type: d.Type, UserID: d.UserId, AppID: d.AppId}}
	if !d.Timestamp.IsZero() {
		ts := d.Timestamp.UTC()
		env.Properties.Timestamp = &ts
	}
	var err error
	if env.Headers, err = encodeTable(h); err != nil {
		e.DecodeError = err.Error()
		env.Headers = nil
	}
	p, err := marshalEnvelope(d.Body, &env)
	if err != nil {
		e.DecodeError = "encode envelope: " + err.Error()
		p, _ = marshalEnvelope(d.Body, &envelope{})
	}
	e.Payload = p
	return e
}

// marshalEnvelope is json.Marshal(env) with env.Body = NewBody(body), the
// body written by brokermsg's appender: encoding/json copied a body twice
// (to a string, then out of its buffer) and escaped it byte by byte, most
// of the envelope's cost for a body of a few KB.
func marshalEnvelope(body []byte, env *envelope) ([]byte, error) {
	env.Body = brokermsg.Body{}
	rest, err := json.Marshal(env) // {"properties":...} at least: never "{}"
	if err != nil {
		return nil, err
	}
	p := make([]byte, 0, len(body)+len(rest)+32)
	p = brokermsg.AppendBody(append(p, '{'), body)
	return append(append(p, ','), rest[1:]...), nil
}
