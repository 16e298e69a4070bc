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
	var env envelope
	if err := json.Unmarshal(e.Payload, &env); err != nil {
		return nil, fmt.Errorf("payload is not a kafka record envelope: %w", err)
	}
	value, err := env.Bytes()
	if err != nil && !errors.Is(err, brokermsg.ErrNoBody) {
		return nil, err
	}
	rkey, err := env.Key.Bytes()
	if err != nil {
		return nil, err
	}
	if env.OriginalTopic == "" {
		return nil, errors.New("the record names no original topic (no kafka_dlt-original-topic or __connect.errors.topic header): give a target in rules.yaml")
	}
	r := &kgo.Record{Topic: env.OriginalTopic, Key: rkey, Value: value}
	for _, h := range env.Headers {
		if h.Key == brokermsg.HeaderKey || h.Key == brokermsg.HeaderCount || h.Key == brokermsg.HeaderLineage {
			continue // restamped below
		}
		v, err := h.Value.Bytes()
		if err != nil {
			return nil, err
		}
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: v})
	}
	r.Headers = append(r.Headers,
		kgo.RecordHeader{Key: brokermsg.HeaderKey, Value: []byte(key)},
		kgo.RecordHeader{Key: brokermsg.HeaderCount, Value: []byte(strconv.Itoa(brokermsg.NextCount(e.Labels)))},
		kgo.RecordHeader{Key: brokermsg.HeaderLineage, Value: []byte(e.LineageStamp())})
	return r, nil
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
