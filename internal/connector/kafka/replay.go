package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/entry"
)

func (c *Conn) producerClient() (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.producer == nil {
		// Idempotent (franz-go's default) with acks=all: the producer's
		// own retries carry sequence numbers, so the broker drops a
		// duplicate; nothing is resent across runs except through the
		// ledger.
		o, err := c.opts()
		if err != nil {
			return nil, err
		}
		cl, err := kgo.NewClient(append(o,
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(c.timeout),
			kgo.ProducerLinger(0), kgo.UnknownTopicRetries(2))...)
		if err != nil {
			return nil, err
		}
		c.producer = cl
	}
	return c.producer, nil
}

// record rebuilds the record to replay from an entry's payload.
func record(e *entry.Entry, key string) (*kgo.Record, error) {
	p, ok := decodeEnvelope(e.Payload)
	if !ok {
		var err error
		if p, err = slowParts(e.Payload); err != nil {
			return nil, err
		}
	}
	if p.topic == "" {
		return nil, errNoTopic
	}
	r := &kgo.Record{Topic: p.topic, Key: p.key, Value: p.value, Headers: p.headers[:0]}
	for _, h := range p.headers {
		if restamped(h.Key) {
			continue // restamped below
		}
		r.Headers = append(r.Headers, h)
	}
	r.Headers = append(r.Headers,
		kgo.RecordHeader{Key: brokermsg.HeaderKey, Value: []byte(key)},
		kgo.RecordHeader{Key: brokermsg.HeaderCount, Value: []byte(strconv.Itoa(brokermsg.NextCount(e.Labels)))},
		kgo.RecordHeader{Key: brokermsg.HeaderLineage, Value: []byte(e.LineageStamp())})
	return r, nil
}

func restamped(k string) bool {
	return k == brokermsg.HeaderKey || k == brokermsg.HeaderCount || k == brokermsg.HeaderLineage
}

var errNoTopic = errors.New("the record names no original topic (no kafka_dlt-original-topic, kafka_original-topic, __connect.errors.topic or x-original-topic header): give a target in rules.yaml")

// slowParts reads the envelope with encoding/json: what decodeEnvelope
// does not take, with its errors in record's order.
func slowParts(payload []byte) (parts, error) {
	var env envelope
	if err := json.Unmarshal(payload, &env); err != nil {
		return parts{}, fmt.Errorf("payload is not a kafka record envelope: %w", err)
	}
	value, err := env.Bytes()
	if err != nil && !errors.Is(err, brokermsg.ErrNoBody) {
		return parts{}, err
	}
	rkey, err := env.Key.Bytes()
	if err != nil {
		return parts{}, err
	}
	if env.OriginalTopic == "" {
		return parts{}, errNoTopic
	}
	p := parts{topic: env.OriginalTopic, key: rkey, value: value}
	for _, h := range env.Headers {
		if restamped(h.Key) {
			continue // record drops it: its value is never read
		}
		v, err := h.Value.Bytes()
		if err != nil {
			return parts{}, err
		}
		p.headers = append(p.headers, kgo.RecordHeader{Key: h.Key, Value: v})
	}
	return p, nil
}

// Replay produces the record to its original topic with its key.
func (c *Conn) Replay(ctx context.Context, req connector.Request) connector.Result {
	rec, err := record(req.Entry, req.Key)
	if err != nil {
		return connector.Result{Outcome: connector.Failed, Detail: "kafka: " + err.Error()}
	}
	cl, err := c.producerClient()
	if err != nil {
		return connector.Result{Outcome: connector.NotSent, TargetDown: true, Detail: "kafka: " + c.redact(err).Error()}
	}
	res, err := cl.ProduceSync(ctx, rec).First()
	if err == nil {
		return connector.Result{Outcome: connector.Succeeded,
			Detail: fmt.Sprintf("kafka: produced to %s/%d at offset %d", res.Topic, res.Partition, res.Offset)}
	}
	detail := "kafka: produce to " + rec.Topic + ": " + c.redact(err).Error()
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke) && !ke.Retriable:
		// The cluster refused it: no such topic, not authorised, too large.
		return connector.Result{Outcome: connector.Failed, Detail: detail}
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return connector.Result{Outcome: connector.Failed, Detail: detail}
	case errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, syscall.ECONNREFUSED):
		// An idempotent producer fails a record by timeout only while no
		// request with it is outstanding (franz-go sink.go, canFail):
		// it never reached the broker.
		return connector.Result{Outcome: connector.NotSent, TargetDown: true, Detail: detail}
	}
	// A timeout or a lost connection after the batch may have been
	// written: the broker may have it.
	return connector.Result{Outcome: connector.Unknown, TargetDown: true, Detail: detail}
}
