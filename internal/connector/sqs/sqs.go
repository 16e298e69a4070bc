package sqs

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/entry"
)

// Kind is the source kind of the entries this connector reads.
const Kind = "sqs"

// Defaults of the spec's options.
const (
	DefaultVisibility = 30 * time.Second
	DefaultWait       = time.Second
)

const (
	attrExceptionMessage = "x-exception-message"
	attrExceptionStack   = "x-exception-stacktrace"
	attrSourceArn        = "DeadLetterQueueSourceArn"
	codeMaxReceive       = "sqs_max_receive_count"
	maxMessage           = 2000
)

// Conn is one SQS dead-letter queue. It implements connector.Connector.
type Conn struct {
	spec       string
	queueURL   string
	name       string
	region     string
	regionSet  bool // region came from the spec
	visibility time.Duration
	wait       time.Duration
	errAttr    string
	client     *awssqs.Client

	now func() time.Time // the clock (time.Now when nil); tests set it

	mu      sync.Mutex
	handles map[string]receipt // MessageId -> this run's latest receipt
	deleted map[string]bool    // MessageIds this connector deleted
	dests   map[string]string  // source ARN ("" = the DLQ's only source) -> queue URL
	notes   []string
}

var _ connector.Connector = (*Conn)(nil)

// Open parses an sqs: spec and builds the client (no request is made).
func Open(spec string) (*Conn, error) { return OpenEnv(spec, os.Getenv) }

// OpenEnv is Open with the region read through getenv; credentials still
// come from the SDK's default chain.
func OpenEnv(spec string, getenv func(string) string) (*Conn, error) {
	rest, ok := strings.CutPrefix(spec, Kind+":")
	if !ok {
		return nil, fmt.Errorf("want %s:QUEUE_URL", Kind)
	}
	u, err := url.Parse(rest)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, errors.New("want sqs:https://sqs.REGION.amazonaws.com/ACCOUNT/QUEUE (an http(s) queue URL without user info)")
	}
	q := u.Query()
	c := &Conn{spec: spec, visibility: DefaultVisibility, wait: DefaultWait, errAttr: q.Get("error_attribute"),
		handles: map[string]receipt{}, deleted: map[string]bool{}, dests: map[string]string{}}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	c.name = parts[len(parts)-1]
	if c.name == "" {
		return nil, errors.New("the queue URL names no queue (want .../ACCOUNT/QUEUE)")
	}
	for name, dst := range map[string]*time.Duration{"visibility": &c.visibility, "wait": &c.wait} {
		if v := q.Get(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > 12*time.Hour || d%time.Second != 0 {
				return nil, fmt.Errorf("%s=%q: want whole seconds such as 30s", name, v)
			}
			*dst = d
		}
	}
	if c.wait > 20*time.Second {
		return nil, errors.New("wait: SQS long-polls at most 20s")
	}
	c.region = q.Get("region")
	c.regionSet = c.region != ""
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		if c.region == "" {
			c.region = getenv(k)
		}
	}
	if c.region == "" {
		if r, ok := strings.CutPrefix(u.Hostname(), "sqs."); ok {
			c.region, _, _ = strings.Cut(r, ".")
		}
	}
	if c.region == "" {
		return nil, errors.New("no region: add ?region=REGION or set AWS_REGION")
	}
	for _, k := range []string{"region", "visibility", "wait", "error_attribute"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	c.queueURL = u.String()
	endpoint := u.Scheme + "://" + u.Host
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(c.region))
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	// The SDK's client follows 307/308 redirects; this one follows none,
	// so a signed request goes to the endpoint named and nowhere else.
	// It keeps the SDK's transport (AWS_CA_BUNDLE and proxies).
	var tr http.RoundTripper = http.DefaultTransport
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		tr = bc.GetTransport()
	}
	cfg.HTTPClient = memBodyClient{&http.Client{Timeout: 60 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	c.client = awssqs.NewFromConfig(cfg, func(o *awssqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	return c, nil
}

// String is the spec as given (an SQS URL holds no secret).
func (c *Conn) String() string { return c.spec }

// Origin is where this connector's entries say they were read; Open takes
// it again.
func (c *Conn) Origin() string {
	if c.regionSet {
		sep := "?"
		if strings.Contains(c.queueURL, "?") {
			sep = "&"
		}
		return Kind + ":" + c.queueURL + sep + "region=" + url.QueryEscape(c.region)
	}
	return Kind + ":" + c.queueURL
}

// Destination names where a replay of e goes: the DLQ's source queue
// (named by the message's DeadLetterQueueSourceArn, else the one queue
// whose dead-letter queue this is). A run's breaker and --rate are per
// route, and a broker entry's route is its destination (issue 28).
func (c *Conn) Destination(e *entry.Entry) string {
	if e.Topic == "" {
		return Kind + ":the source queue of " + c.queueURL
	}
	return Kind + ":" + c.queueURL[:strings.LastIndexByte(c.queueURL, '/')+1] + e.Topic
}

// Notes says how many messages the DLQ held and how many were read.
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

// Entries receives the DLQ's messages until it is gone round.
func (c *Conn) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		fail := func(err error) { yield(entry.Entry{}, fmt.Errorf("sqs queue %s: %w", c.name, err)) }
		attrs, err := c.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &c.queueURL,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil {
			fail(err)
			return
		}
		held, _ := strconv.Atoi(attrs.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
		c.note("sqs queue %s held about %d visible messages when the read began", c.name, held)
		in := &awssqs.ReceiveMessageInput{
			QueueUrl:                    &c.queueURL,
			MaxNumberOfMessages:         10,
			VisibilityTimeout:           int32(c.visibility / time.Second),
			WaitTimeSeconds:             int32(c.wait / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		}
		// One receive runs ahead: while the caller takes one answer's
		// entries (converted here, stored there), the next answer is on its
		// way. The next receive is asked for only once an answer brought a
		// message not read yet, so when the read ends no receive is in
		// flight whose messages it would leave unread and invisible. A
		// caller that stops early leaves at most one answer's messages
		// invisible until their visibility timeout, as a killed run does.
		more := make(chan struct{}, 1)
		answers := make(chan receiveAnswer, 1)
		go func() {
			defer close(answers)
			for range more {
				asked := c.clock()
				out, err := c.client.ReceiveMessage(ctx, in)
				a := receiveAnswer{err: err, asked: asked}
				if out != nil {
					a.msgs = out.Messages
				}
				answers <- a // never blocks: the next is asked for after this one is taken
				if err != nil {
					return
				}
			}
		}()
		defer close(more)
		more <- struct{}{}
		seen := map[string]bool{}
		mine := map[string]bool{} // received by this read, for the in-flight note
		read, recheck := 0, 0
		for a := range answers {
			if a.err != nil {
				if ctx.Err() == nil {
					fail(fmt.Errorf("receive after %d messages: %w", read, a.err))
					return
				}
				c.note("sqs queue %s: the read was cancelled with a receive in flight: its messages, if it got any, stay invisible "+
					"until their visibility timeout (%s) ends and a later run reads them", c.name, c.visibility)
				break
			}
			fresh := 0
			c.mu.Lock()
			for i := range a.msgs {
				m := &a.msgs[i]
				id := aws.ToString(m.MessageId)
				c.handles[id] = receipt{handle: aws.ToString(m.ReceiptHandle), asked: a.asked}
				mine[id] = true
				if !seen[id] {
					fresh++
				}
			}
			c.mu.Unlock()
			if fresh == 0 {
				if c.shortOfHeld(ctx, read, held, mine, &recheck) {
					more <- struct{}{}
					continue
				}
				break
			}
			more <- struct{}{}
			for i := range a.msgs {
				m := &a.msgs[i]
				id := aws.ToString(m.MessageId)
				if seen[id] {
					continue // visible again within this read: already yielded
				}
				seen[id] = true
				read++
				if !yield(c.entryOf(m), nil) {
					c.note("sqs queue %s: the read stopped after %d messages; the rest of the answer being read (%d) and one answer received ahead "+
						"(up to 10) are neither stored nor deleted: they stay invisible until their visibility timeout (%s) ends and a later run reads them",
						c.name, read, len(a.msgs)-i-1, c.visibility)
					return
				}
			}
		}
		c.note("sqs queue %s: read %d messages", c.name, read)
	}
}

// receiveAnswer is one ReceiveMessage's messages.
type receiveAnswer struct {
	msgs  []types.Message
	err   error
	asked time.Time // when the receive was sent: its visibility began after
}

// receipt is a message's receipt handle from this run's latest receive of
// it, and when that receive was sent.
type receipt struct {
	handle string
	asked  time.Time
}

func (c *Conn) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// shortOfHeld reports whether a read that got an answer with nothing new
// should receive again: it read fewer than the queue held when it began
// and the queue says messages are visible (an empty answer can be a
// sample of SQS's servers). Ending short, it notes how many others are in
// flight.
func (c *Conn) shortOfHeld(ctx context.Context, read, held int, received map[string]bool, recheck *int) bool {
	if read >= held || *recheck >= maxRechecks || ctx.Err() != nil {
		return false
	}
	*recheck++
	visible, inFlight, err := c.counts(ctx)
	if err != nil {
		return false
	}
	if visible > 0 {
		return true
	}
	mine := 0 // this read's messages still in flight (not deleted)
	c.mu.Lock()
	for id := range received {
		if !c.deleted[id] {
			mine++
		}
	}
	c.mu.Unlock()
	if others := inFlight - mine; others > 0 {
		c.note("sqs queue %s: read %d of about %d: about %d more are in flight (received by another consumer, or by a receive whose answer was lost) "+
			"and are read by a later run once their visibility timeout ends", c.name, read, held, others)
	}
	return false
}

// maxRechecks bounds how often a read short of the queue's count asks the
// queue again before it ends.
const maxRechecks = 3

// counts is the queue's approximate visible and in-flight messages.
func (c *Conn) counts(ctx context.Context) (visible, inFlight int, err error) {
	out, err := c.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &c.queueURL,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, 0, err
	}
	visible, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inFlight, nil
}

// Settle deletes the message from the DLQ with the receipt handle of this
// run's latest receive of it. SQS answers a delete with any but a
// message's most recent handle with success and may delete nothing
// (API_DeleteMessage), so a success proves the delete only while no one
// else can have received the message since: within the handle's
// visibility timeout. Without such a handle Settle errs and deletes
// nothing; the write-back stays pending and a later run, receiving the
// message again, settles it with a fresh handle.
func (c *Conn) Settle(ctx context.Context, e *entry.Entry, _ connector.Settlement) error {
	if e.Source != Kind {
		return nil
	}
	c.mu.Lock()
	r, ok := c.handles[e.ID]
	done := c.deleted[e.ID]
	c.mu.Unlock()
	if done {
		return nil // settling is idempotent
	}
	if !ok {
		return fmt.Errorf("sqs: message %s was not received by this run: it is deleted from %s when a later run receives it again", e.ID, c.name)
	}
	if age, margin := c.clock().Sub(r.asked), min(staleMargin, c.visibility/10); age >= c.visibility-margin {
		return fmt.Errorf("sqs: message %s was received %s ago, past its visibility timeout (%s) less %s: another receive may have replaced "+
			"its receipt handle, and SQS answers a delete with an old handle with success without deleting; it is deleted from %s "+
			"when a later run receives it again", e.ID, age.Round(time.Second), c.visibility, margin, c.name)
	}
	h := r.handle
	if _, err := c.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &c.queueURL, ReceiptHandle: &h}); err != nil {
		return fmt.Errorf("sqs: delete %s from %s: %w", e.ID, c.name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.handles[e.ID]; now.handle != h {
		// This run's read received it again while the delete was on its
		// way: the delete may have been with a replaced handle.
		return fmt.Errorf("sqs: message %s was received again while it was being deleted from %s: the delete may not have taken; "+
			"it is deleted when it is received again", e.ID, c.name)
	}
	delete(c.handles, e.ID)
	c.deleted[e.ID] = true
	return nil
}

// staleMargin is how long before its visibility timeout ends a receipt
// handle is no longer trusted to be the message's latest (at most a tenth
// of the timeout): the age is taken from the receive's send, before SQS
// started the timeout, so the margin covers only clocks running apart.
const staleMargin = 2 * time.Second

// ProbeEntry cannot tell: a queue cannot be searched.
func (c *Conn) ProbeEntry(context.Context, *entry.Entry) (connector.ProbeResult, string) {
	return connector.ProbeInconclusive, "sqs: a queue cannot be searched for a message"
}

// Ref names the message.
func (c *Conn) Ref(e *entry.Entry) connector.Link {
	return connector.Link{Name: "message " + e.ID + " in queue " + e.Scope}
}

// Codes lists the reason codes the connector writes.
func (c *Conn) Codes() []connector.Code {
	return append([]connector.Code{{Code: codeMaxReceive, Class: "unrecognised",
		Where: "SQS redrive policy (maxReceiveCount) without an application error: unrecognised"}},
		brokermsg.ExceptionCodes("x-exception-message / x-exception-stacktrace message attributes")...)
}

// attribute is a message attribute in the payload envelope.
type attribute struct {
	DataType    string  `json:"data_type"`
	StringValue *string `json:"string_value,omitempty"`
	BinaryValue string  `json:"binary_value,omitempty"` // base64
}

// envelope is an entry's payload: the message as the DLQ held it.
type envelope struct {
	brokermsg.Body
	MessageID         string               `json:"message_id"`
	Attributes        map[string]string    `json:"attributes,omitempty"`
	MessageAttributes map[string]attribute `json:"message_attributes,omitempty"`
}

func (c *Conn) entryOf(m *types.Message) entry.Entry {
	id := aws.ToString(m.MessageId)
	e := entry.Entry{ID: id, Source: Kind, Scope: c.name, Origin: c.Origin()}
	strAttr := func(k string) (string, bool) {
		if v, ok := m.MessageAttributes[k]; ok && v.StringValue != nil {
			return *v.StringValue, true
		}
		return "", false
	}
	if n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"]); err == nil {
		e.Attempts = n
	}
	if ms, err := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64); err == nil {
		e.FirstFailure = time.UnixMilli(ms).UTC()
		e.LastFailure = e.FirstFailure
	}
	labels := map[string]string{"sqs.dlq": c.name}
	if arn := m.Attributes[attrSourceArn]; arn != "" {
		e.Topic = arn[strings.LastIndexByte(arn, ':')+1:]
		labels["sqs.source_queue"] = e.Topic
	}
	appMsg, _ := strAttr(attrExceptionMessage)
	stack, _ := strAttr(attrExceptionStack)
	if appMsg == "" && c.errAttr != "" {
		appMsg, _ = strAttr(c.errAttr)
	}
	if appMsg == "" && stack != "" {
		appMsg, _, _ = strings.Cut(stack, "\n")
	}
	e.ReasonCode = brokermsg.ExceptionCode(nil, appMsg, stack)
	if e.ReasonCode == "" {
		// Received too often says only that consumers failed it.
		e.ReasonCode = codeMaxReceive
	}
	e.Message = brokermsg.Excerpt(appMsg, maxMessage)
	key, _ := strAttr(brokermsg.HeaderKey)
	if count, stamped := strAttr(brokermsg.HeaderCount); stamped {
		labels = brokermsg.SetLineage(labels, key, count)
	} else if key != "" {
		e.IdempotencyKey = key
	}
	lineage, _ := strAttr(brokermsg.HeaderLineage)
	brokermsg.ReadLineage(&e, lineage)
	e.Labels = labels
	if e.IdempotencyKey == "" {
		e.IdempotencyKey, e.KeyDerived = entry.DeriveKey(Kind, c.name+"/"+id), true
	}
	e.Payload = appendEnvelope(nil, m, id)
	return e
}

// appendEnvelope appends m's envelope as json.Marshal(envelope{...})
// writes it, byte for byte (TestAppendEnvelopeIsMarshal and
// FuzzAppendEnvelopeIsMarshal hold it to json.Marshal): a message read
// again must give the payload it gave before. The Marshal's reflection
// and map sorting were half of a message's conversion.
func appendEnvelope(dst []byte, m *types.Message, id string) []byte {
	body := aws.ToString(m.Body)
	size := len(body) + len(body)/8 + len(id) + 64
	for k, v := range m.Attributes {
		size += len(k) + len(v) + 8
	}
	for k, v := range m.MessageAttributes {
		size += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)*4/3 + 64
	}
	if cap(dst)-len(dst) < size {
		dst = append(make([]byte, 0, len(dst)+size), dst...)
	}
	dst = append(dst, '{')
	if utf8.ValidString(body) {
		dst = brokermsg.AppendMarshalString(brokermsg.AppendKey(dst, "body"), body)
	} else {
		dst = append(brokermsg.AppendKey(dst, "body_base64"), '"')
		dst = append(base64.StdEncoding.AppendEncode(dst, []byte(body)), '"')
	}
	dst = brokermsg.AppendMarshalString(brokermsg.AppendKey(dst, "message_id"), id)
	if len(m.Attributes) > 0 {
		dst = append(brokermsg.AppendKey(dst, "attributes"), '{')
		for i, k := range sortedKeys(m.Attributes) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(brokermsg.AppendMarshalString(dst, k), ':')
			dst = brokermsg.AppendMarshalString(dst, m.Attributes[k])
		}
		dst = append(dst, '}')
	}
	if len(m.MessageAttributes) > 0 {
		dst = append(brokermsg.AppendKey(dst, "message_attributes"), '{')
		for i, k := range sortedKeys(m.MessageAttributes) {
			if i > 0 {
				dst = append(dst, ',')
			}
			v := m.MessageAttributes[k]
			dst = append(brokermsg.AppendMarshalString(dst, k), ':', '{')
			dst = brokermsg.AppendMarshalString(brokermsg.AppendKey(dst, "data_type"), aws.ToString(v.DataType))
			if v.StringValue != nil {
				dst = brokermsg.AppendMarshalString(brokermsg.AppendKey(dst, "string_value"), *v.StringValue)
			}
			if len(v.BinaryValue) > 0 {
				dst = append(brokermsg.AppendKey(dst, "binary_value"), '"')
				dst = append(base64.StdEncoding.AppendEncode(dst, v.BinaryValue), '"')
			}
			dst = append(dst, '}')
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// sortedKeys is m's keys in json.Marshal's order for a map's keys.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// destination finds the source queue's URL for a message.
func (c *Conn) destination(ctx context.Context, sourceArn string) (string, error) {
	c.mu.Lock()
	u, ok := c.dests[sourceArn]
	c.mu.Unlock()
	if ok {
		return u, nil
	}
	if sourceArn != "" {
		// arn:aws:sqs:REGION:ACCOUNT:NAME
		parts := strings.Split(sourceArn, ":")
		if len(parts) != 6 {
			return "", fmt.Errorf("DeadLetterQueueSourceArn %q is not an SQS ARN", sourceArn)
		}
		out, err := c.client.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: &parts[5], QueueOwnerAWSAccountId: &parts[4]})
		if err != nil {
			return "", fmt.Errorf("source queue %s: %w", parts[5], err)
		}
		u = aws.ToString(out.QueueUrl)
	} else {
		out, err := c.client.ListDeadLetterSourceQueues(ctx, &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: &c.queueURL})
		if err != nil {
			return "", fmt.Errorf("list the source queues of %s: %w", c.name, err)
		}
		if len(out.QueueUrls) != 1 {
			return "", fmt.Errorf("%w: "+"%s is the dead-letter queue of %d queues, and the message does not say which: give a target in rules.yaml", errNoSource, c.name, len(out.QueueUrls))
		}
		u = out.QueueUrls[0]
	}
	c.mu.Lock()
	c.dests[sourceArn] = u
	c.mu.Unlock()
	return u, nil
}

// maxAttributes is how many message attributes SQS takes on a message
// ("Each message can have up to 10 attributes": Amazon SQS Developer
// Guide, "Message metadata for Amazon SQS"; SendMessage refuses more with
// InvalidParameterValue).
const maxAttributes = 10

// stamps are the attributes every replay sets (replacing any the message
// arrived with).
var stamps = [...]string{brokermsg.HeaderKey, brokermsg.HeaderCount, brokermsg.HeaderLineage}

// kept counts the attributes a replay keeps besides its stamps.
func kept(attrs map[string]attribute) int {
	n := len(attrs)
	for _, k := range stamps {
		if _, ok := attrs[k]; ok {
			n--
		}
	}
	return n
}

// errNoSource: the DLQ has no single source queue to replay to.
var errNoSource = errors.New("no single source queue")

// DedupID is the MessageDeduplicationId of a replay to a FIFO queue: the
// idempotency key hashed to SQS's limit (128 characters).
func DedupID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Replay sends the message to the DLQ's source queue.
func (c *Conn) Replay(ctx context.Context, r connector.Request) connector.Result {
	var env envelope
	if err := json.Unmarshal(r.Entry.Payload, &env); err != nil {
		return connector.Result{Outcome: connector.Failed, Detail: "sqs: payload is not an sqs message envelope: " + err.Error()}
	}
	body, err := env.Bytes()
	if err != nil {
		return connector.Result{Outcome: connector.Failed, Detail: "sqs: " + err.Error()}
	}
	dest, err := c.destination(ctx, env.Attributes[attrSourceArn])
	if errors.Is(err, errNoSource) {
		return connector.Result{Outcome: connector.Failed, Detail: "sqs: " + err.Error()}
	}
	if err != nil {
		return c.failure("find the source queue", err, false) // the message itself was not sent
	}
	if n := kept(env.MessageAttributes); n+len(stamps) > maxAttributes {
		// SQS refuses a message with more than 10 attributes, and one sent
		// without the stamps would come back unlinked (max_replays could
		// not count it): a person decides (send it another way, drop
		// attributes), nothing is sent.
		return connector.Result{Outcome: connector.Failed, Detail: fmt.Sprintf("sqs: not sent: the message has %d message attributes of its own "+
			"and a replay adds %d (%s), past SQS's limit of %d a message; a person must replay it another way", n, len(stamps), strings.Join(stamps[:], ", "), maxAttributes)}
	}
	attrs := map[string]types.MessageAttributeValue{}
	for k, a := range env.MessageAttributes {
		v := types.MessageAttributeValue{DataType: aws.String(a.DataType), StringValue: a.StringValue}
		if a.BinaryValue != "" {
			if v.BinaryValue, err = base64.StdEncoding.DecodeString(a.BinaryValue); err != nil {
				return connector.Result{Outcome: connector.Failed, Detail: "sqs: attribute " + k + ": " + err.Error()}
			}
		}
		attrs[k] = v
	}
	attrs[brokermsg.HeaderKey] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(r.Key)}
	attrs[brokermsg.HeaderCount] = types.MessageAttributeValue{DataType: aws.String("Number"),
		StringValue: aws.String(strconv.Itoa(brokermsg.NextCount(r.Entry.Labels)))}
	attrs[brokermsg.HeaderLineage] = types.MessageAttributeValue{DataType: aws.String("String"),
		StringValue: aws.String(r.Entry.LineageStamp())}
	in := &awssqs.SendMessageInput{QueueUrl: &dest, MessageBody: aws.String(string(body)), MessageAttributes: attrs}
	if strings.HasSuffix(dest, ".fifo") {
		group := env.Attributes["MessageGroupId"]
		if group == "" {
			group = "replayctl"
		}
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(group), aws.String(DedupID(r.Key))
	}
	// No SDK retry: a resend without the ledger could deliver twice.
	// Whether the request was written in full: an error before that is
	// a message that never left.
	var wrote atomic.Bool
	tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}})
	out, err := c.client.SendMessage(tctx, in, func(o *awssqs.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil {
		return c.failure("send to "+dest, err, wrote.Load())
	}
	return connector.Result{Outcome: connector.Succeeded, Detail: "sqs: sent to " + dest + " as " + aws.ToString(out.MessageId)}
}

// failure classifies an SDK error as the HTTP targets do: a 4xx answer is
// a refusal (a throttle excepted), a 5xx one retryable, no answer to a
// request not written in full (or a refused connection) not sent, else
// unknown: the message may be in the queue.
func (c *Conn) failure(what string, err error, wrote bool) connector.Result {
	detail := "sqs: " + what + ": " + err.Error()
	var re *awshttp.ResponseError
	answered := errors.As(err, &re) && re.HTTPStatusCode() != 0
	if !answered && (!wrote || errors.Is(err, syscall.ECONNREFUSED)) {
		return connector.Result{Outcome: connector.NotSent, TargetDown: true, Detail: detail}
	}
	if answered {
		st := re.HTTPStatusCode()
		var api smithy.APIError
		throttled := errors.As(err, &api) && strings.Contains(api.ErrorCode(), "Throttl")
		switch {
		case st >= 500 || st == http.StatusTooManyRequests || throttled:
			return connector.Result{Outcome: connector.Retry, Status: st, Detail: detail, TargetDown: st >= 502 && st <= 504}
		default:
			return connector.Result{Outcome: connector.Failed, Status: st, Detail: detail}
		}
	}
	return connector.Result{Outcome: connector.Unknown, TargetDown: true, Detail: detail}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
