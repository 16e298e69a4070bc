// Package sqstest is a hand-made SQS-compatible server for tests: the AWS
// JSON 1.0 protocol (POST /, X-Amz-Target: AmazonSQS.OPERATION) that the
// current aws-sdk-go-v2/service/sqs speaks, for the operations replayctl
// uses: ReceiveMessage, DeleteMessage, SendMessage, GetQueueAttributes,
// ListDeadLetterSourceQueues, ChangeMessageVisibility, GetQueueUrl. It
// was written from the SQS API reference
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/),
// not from an SQS implementation: goaws v0.4.5 speaks only the query
// protocol, lacks ListDeadLetterSourceQueues and ignores a receive's
// VisibilityTimeout.
//
// What it models: visibility timeouts and receipt handles (only a
// message's latest handle deletes it; an older one is answered with
// success and deletes nothing, as the DeleteMessage reference says), ApproximateReceiveCount, a redrive
// policy (a message received more than maxReceiveCount times moves to its
// dead-letter queue with the same MessageId and a
// DeadLetterQueueSourceArn attribute), FIFO queues (MessageGroupId
// required, MessageDeduplicationId deduplicated for five minutes) and the
// JSON error shape with its x-amzn-query-error header.
package sqstest

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Account and Region are what the server's queue URLs and ARNs name.
const (
	Account = "000000000000"
	Region  = "us-east-1"
)

// Attribute is a message attribute as the JSON protocol carries it.
type Attribute struct {
	DataType    string  `json:"DataType"`
	StringValue *string `json:"StringValue,omitempty"`
	BinaryValue []byte  `json:"BinaryValue,omitempty"` // base64 in JSON, as the SDK sends blobs
}

// Message is one message in a queue.
type Message struct {
	ID, Body       string
	Attributes     map[string]Attribute
	System         map[string]string
	ReceiveCount   int
	InvisibleUntil time.Time
	Handle         string
	GroupID        string
	DedupID        string
	Sent           time.Time
}

// Queue is one queue.
type Queue struct {
	Name            string
	FIFO            bool
	DLQ             string // name of its dead-letter queue, "" if none
	MaxReceiveCount int
	Messages        []*Message
	dedup           map[string]dedupEntry
}

type dedupEntry struct {
	id string
	at time.Time
}

// Server is the fake. Its exported fields may be set before use.
type Server struct {
	*httptest.Server
	// Now is the server's clock (time.Now when nil).
	Now func() time.Time
	// Fault, when set, is asked before each operation; a non-zero status
	// is answered as an InternalError (5xx) or the named error (4xx)
	// instead of performing it.
	Fault func(op string) int
	// LoseAnswer, when set, is asked after each operation is performed; on
	// true the connection is closed without an answer (a lost answer: the
	// client cannot tell whether the operation happened).
	LoseAnswer func(op string) bool

	mu      sync.Mutex
	queues  map[string]*Queue
	deleted map[string]bool // receipt handles of deleted messages
	older   map[string]bool // receipt handles a later receive replaced
	calls   map[string]int
}

// New starts a server; it is closed when the test ends.
func New(t interface{ Cleanup(func()) }) *Server {
	s := &Server{queues: map[string]*Queue{}, deleted: map[string]bool{}, older: map[string]bool{}, calls: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// CreateQueue makes a queue; dlq, when set, is its dead-letter queue
// (which must exist) with the given maxReceiveCount.
func (s *Server) CreateQueue(name, dlq string, maxReceiveCount int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues[name] = &Queue{Name: name, FIFO: strings.HasSuffix(name, ".fifo"), DLQ: dlq, MaxReceiveCount: maxReceiveCount,
		dedup: map[string]dedupEntry{}}
	return s.URLOf(name)
}

// URLOf is a queue's URL.
func (s *Server) URLOf(name string) string { return s.URL + "/" + Account + "/" + name }

// ARNOf is a queue's ARN.
func ARNOf(name string) string { return "arn:aws:sqs:" + Region + ":" + Account + ":" + name }

// Messages returns a copy of the queue's messages (visible or not).
func (s *Server) Messages(name string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	if q := s.queues[name]; q != nil {
		for _, m := range q.Messages {
			out = append(out, *m)
		}
	}
	return out
}

// ExpireVisibility makes every message of the queue visible now, as the
// end of its visibility timeout would.
func (s *Server) ExpireVisibility(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[name]; q != nil {
		for _, m := range q.Messages {
			m.InvisibleUntil = time.Time{}
		}
	}
}

// Calls is how often op was called.
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

type apiError struct {
	status     int
	typ, query string
	message    string
}

func (e *apiError) Error() string { return e.typ + ": " + e.message }

func errNoQueue() *apiError {
	return &apiError{400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist."}
}

func errInvalid(msg string) *apiError {
	return &apiError{400, "InvalidParameterValue", "InvalidParameterValue", msg}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	if r.Method != http.MethodPost || !ok {
		writeErr(w, &apiError{400, "InvalidAction", "InvalidAction", "want POST with X-Amz-Target: AmazonSQS.OPERATION"})
		return
	}
	var in map[string]json.RawMessage
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
		writeErr(w, errInvalid("bad JSON body: "+err.Error()))
		return
	}
	s.mu.Lock()
	s.calls[op]++
	s.mu.Unlock()
	if s.Fault != nil {
		if st := s.Fault(op); st != 0 {
			if st >= 500 {
				writeErr(w, &apiError{st, "InternalError", "InternalError", "injected fault"})
			} else {
				writeErr(w, &apiError{st, "AccessDenied", "AccessDenied", "injected fault"})
			}
			return
		}
	}
	s.mu.Lock()
	out, aerr := s.do(op, in)
	s.mu.Unlock()
	if s.LoseAnswer != nil && s.LoseAnswer(op) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	if aerr != nil {
		writeErr(w, aerr)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(out)
}

func writeErr(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-query-error", e.query+";Sender")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#" + e.typ, "message": e.message})
}

func str(in map[string]json.RawMessage, k string) string {
	var s string
	_ = json.Unmarshal(in[k], &s)
	return s
}

func num(in map[string]json.RawMessage, k string, def int) int {
	if _, ok := in[k]; !ok {
		return def
	}
	var n int
	if json.Unmarshal(in[k], &n) != nil {
		return def
	}
	return n
}

func strs(in map[string]json.RawMessage, k string) []string {
	var ss []string
	_ = json.Unmarshal(in[k], &ss)
	return ss
}

func (s *Server) queueOf(in map[string]json.RawMessage) (*Queue, *apiError) {
	u := str(in, "QueueUrl")
	name := u[strings.LastIndexByte(u, '/')+1:]
	if q := s.queues[name]; q != nil && u == s.URLOf(name) {
		return q, nil
	}
	return nil, errNoQueue()
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (s *Server) do(op string, in map[string]json.RawMessage) (any, *apiError) {
	now := s.now()
	switch op {
	case "GetQueueUrl":
		name := str(in, "QueueName")
		if s.queues[name] == nil {
			return nil, errNoQueue()
		}
		if acct := str(in, "QueueOwnerAWSAccountId"); acct != "" && acct != Account {
			return nil, errNoQueue()
		}
		return map[string]string{"QueueUrl": s.URLOf(name)}, nil
	case "ListDeadLetterSourceQueues":
		q, err := s.queueOf(in)
		if err != nil {
			return nil, err
		}
		urls := []string{}
		for _, src := range s.queues {
			if src.DLQ == q.Name {
				urls = append(urls, s.URLOf(src.Name))
			}
		}
		sort.Strings(urls)
		return map[string]any{"queueUrls": urls}, nil
	case "GetQueueAttributes":
		q, err := s.queueOf(in)
		if err != nil {
			return nil, err
		}
		visible, hidden := 0, 0
		for _, m := range q.Messages {
			if m.InvisibleUntil.After(now) {
				hidden++
			} else {
				visible++
			}
		}
		attrs := map[string]string{
			"ApproximateNumberOfMessages":           strconv.Itoa(visible),
			"ApproximateNumberOfMessagesNotVisible": strconv.Itoa(hidden),
			"QueueArn":                              ARNOf(q.Name),
			"FifoQueue":                             strconv.FormatBool(q.FIFO),
		}
		if q.DLQ != "" {
			attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, ARNOf(q.DLQ), q.MaxReceiveCount)
		}
		return map[string]any{"Attributes": attrs}, nil
	case "SendMessage":
		q, err := s.queueOf(in)
		if err != nil {
			return nil, err
		}
		body := str(in, "MessageBody")
		if body == "" {
			return nil, errInvalid("The request must contain the parameter MessageBody.")
		}
		var attrs map[string]Attribute
		_ = json.Unmarshal(in["MessageAttributes"], &attrs)
		// "Each message can have up to 10 attributes" (Amazon SQS
		// Developer Guide, "Message metadata for Amazon SQS",
		// sqs-message-metadata); SendMessage answers more with 400
		// InvalidParameterValue.
		if len(attrs) > 10 {
			return nil, errInvalid("Number of message attributes [" + strconv.Itoa(len(attrs)) + "] exceeds the allowed maximum [10].")
		}
		m := &Message{ID: newID(), Body: body, Attributes: attrs, Sent: now, System: map[string]string{}}
		if q.FIFO {
			m.GroupID, m.DedupID = str(in, "MessageGroupId"), str(in, "MessageDeduplicationId")
			if m.GroupID == "" {
				return nil, &apiError{400, "MissingParameter", "MissingParameter", "The request must contain the parameter MessageGroupId."}
			}
			if m.DedupID == "" {
				return nil, errInvalid("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
			}
			if len(m.DedupID) > 128 {
				return nil, errInvalid("MessageDeduplicationId is longer than 128 characters")
			}
			if d, ok := q.dedup[m.DedupID]; ok && now.Sub(d.at) < 5*time.Minute {
				return map[string]string{"MessageId": d.id, "MD5OfMessageBody": md5hex(body)}, nil
			}
			q.dedup[m.DedupID] = dedupEntry{id: m.ID, at: now}
			m.System["MessageGroupId"] = m.GroupID
			m.System["MessageDeduplicationId"] = m.DedupID
		}
		q.Messages = append(q.Messages, m)
		return map[string]string{"MessageId": m.ID, "MD5OfMessageBody": md5hex(body)}, nil
	case "ReceiveMessage":
		q, err := s.queueOf(in)
		if err != nil {
			return nil, err
		}
		max := num(in, "MaxNumberOfMessages", 1)
		if max < 1 || max > 10 {
			return nil, errInvalid("Value for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10.")
		}
		vis := time.Duration(num(in, "VisibilityTimeout", 30)) * time.Second
		wantAll := func(names []string) bool { return len(names) > 0 }
		sys := wantAll(append(strs(in, "AttributeNames"), strs(in, "MessageSystemAttributeNames")...))
		msgAttrs := wantAll(strs(in, "MessageAttributeNames"))
		out := []map[string]any{}
		kept := q.Messages[:0]
		var moved []*Message
		for _, m := range q.Messages {
			if len(out) >= max || m.InvisibleUntil.After(now) {
				kept = append(kept, m)
				continue
			}
			if q.DLQ != "" && m.ReceiveCount >= q.MaxReceiveCount {
				// The redrive policy: received too often, it moves to the
				// DLQ with its MessageId instead of being delivered.
				m.System["DeadLetterQueueSourceArn"] = ARNOf(q.Name)
				moved = append(moved, m)
				continue
			}
			m.ReceiveCount++
			m.InvisibleUntil = now.Add(vis)
			if m.Handle != "" {
				s.older[m.Handle] = true
			}
			m.Handle = newID() + "#" + m.ID
			if m.ReceiveCount == 1 {
				m.System["ApproximateFirstReceiveTimestamp"] = strconv.FormatInt(now.UnixMilli(), 10)
			}
			rm := map[string]any{"MessageId": m.ID, "ReceiptHandle": m.Handle, "Body": m.Body, "MD5OfBody": md5hex(m.Body)}
			if sys {
				a := map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.ReceiveCount),
					"SentTimestamp": strconv.FormatInt(m.Sent.UnixMilli(), 10)}
				for k, v := range m.System {
					a[k] = v
				}
				rm["Attributes"] = a
			}
			if msgAttrs && len(m.Attributes) > 0 {
				rm["MessageAttributes"] = m.Attributes
			}
			out = append(out, rm)
			kept = append(kept, m)
		}
		q.Messages = kept
		if dlq := s.queues[q.DLQ]; dlq != nil {
			for _, m := range moved {
				if m.Handle != "" {
					s.older[m.Handle] = true
				}
				m.InvisibleUntil, m.Handle = time.Time{}, ""
				dlq.Messages = append(dlq.Messages, m)
			}
		}
		if len(out) == 0 {
			return map[string]any{}, nil
		}
		return map[string]any{"Messages": out}, nil
	case "DeleteMessage":
		q, err := s.queueOf(in)
		if err != nil {
			return nil, err
		}
		h := str(in, "ReceiptHandle")
		for i, m := range q.Messages {
			if m.Handle == h && h != "" {
				q.Messages = append(q.Messages[:i], q.Messages[i+1:]...)
				s.deleted[h] = true
				return map[string]any{}, nil
			}
		}
		if s.deleted[h] {
			return map[string]any{}, nil // deleting twice is not an error
		}
		if s.older[h] {
			// API_DeleteMessage: "if you don't provide the most recently
			// received receipt handle for the message, the request will
			// still succeed, but the message might not be deleted"
			// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_DeleteMessage.html).
			// This server takes the worse branch: success, nothing deleted.
			return map[string]any{}, nil
		}
		return nil, &apiError{400, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", "The input receipt handle is invalid."}
	case "ChangeMessageVisibility":
		q, err := s.queueOf(in)
		if err != nil {
			return nil, err
		}
		h := str(in, "ReceiptHandle")
		for _, m := range q.Messages {
			if m.Handle == h && h != "" {
				m.InvisibleUntil = now.Add(time.Duration(num(in, "VisibilityTimeout", 0)) * time.Second)
				return map[string]any{}, nil
			}
		}
		return nil, &apiError{400, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", "The input receipt handle is invalid."}
	}
	return nil, &apiError{400, "InvalidAction", "InvalidAction", "The action " + op + " is not valid for this endpoint."}
}
