package kafka

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/entry"
)

// entryOfPlain is entryOf as it was written first, plainly (a string per
// header, ParseInt for numbers, no memo, entry.DeriveKey): the reference
// TestEntryOfMatchesPlain holds the faster entryOf to. A re-read record
// must give the same entry and the same payload bytes as before (the
// ledger tells a changed payload by its hash).
func (c *Conn) entryOfPlain(r *kgo.Record) entry.Entry {
	str := func(k string) string { return string(headerValue(r, k)) }
	id := make([]byte, 0, len(r.Topic)+24)
	id = append(id, r.Topic...)
	id = append(append(id, '/'), strconv.FormatInt(int64(r.Partition), 10)...)
	id = append(append(id, '/'), strconv.FormatInt(r.Offset, 10)...)
	e := entry.Entry{
		ID:           string(id),
		Source:       Kind,
		Origin:       c.origin,
		Attempts:     1,
		FirstFailure: r.Timestamp.UTC(),
		LastFailure:  r.Timestamp.UTC(),
	}
	labels := make(map[string]string, 6)
	labels["kafka.dlt"] = r.Topic
	orig, part, off := str(dltTopic), headerValue(r, dltPartition), headerValue(r, dltOffset)
	if orig == "" {
		orig, part, off = str(retryTopic), headerValue(r, retryPartition), headerValue(r, retryOffset)
	}
	if orig == "" {
		orig, part, off = str(connTopic), headerValue(r, connPartition), headerValue(r, connOffset)
	}
	if orig == "" {
		orig, part, off = str(binderTopic), headerValue(r, binderPartition), headerValue(r, binderOffset)
	}
	if orig == "" {
		// Spring's default DLT name is TOPIC.DLT (TOPIC-dlt for retry topics).
		for _, suf := range []string{".DLT", "-dlt", ".dlt", "-DLT"} {
			if t, ok := strings.CutSuffix(r.Topic, suf); ok && t != "" {
				orig = t
				break
			}
		}
	}
	e.Topic = orig
	var origPart *int32
	var origOff *int64
	if n, ok := numberPlain(part, 4); ok {
		p := int32(n)
		origPart = &p
		labels["kafka.original_partition"] = strconv.Itoa(int(p))
	}
	if n, ok := numberPlain(off, 8); ok {
		origOff = &n
		labels["kafka.original_offset"] = strconv.FormatInt(n, 10)
	}
	if orig != "" {
		labels["kafka.original_topic"] = orig
	}
	// The sequence whose order replays keep (replay/order.go): the
	// original partition, else the DLT partition, whose offsets are the
	// order the records failed in.
	if orig != "" && origPart != nil {
		labels[entry.OrderLabel] = Kind + ":" + orig + "/" + strconv.Itoa(int(*origPart))
	} else {
		labels[entry.OrderLabel] = Kind + ":" + r.Topic + "/" + strconv.Itoa(int(r.Partition))
	}
	if origOff != nil && origPart != nil {
		labels[entry.OrderPosLabel] = strconv.FormatInt(*origOff, 10)
	} else {
		labels[entry.OrderPosLabel] = strconv.FormatInt(r.Offset, 10)
	}
	first := func(names ...string) string {
		for _, n := range names {
			if n == "" {
				continue
			}
			if v := str(n); v != "" {
				return v
			}
		}
		return ""
	}
	fqcn, cause, connCl := first(dltFQCN, retryFQCN, binderFQCN, dltKeyFQCN, retryKeyFQCN), first(dltCauseFQCN, retryCauseFQCN), str(connClass)
	msg := first(dltMessage, retryMessage, connMessage, binderMessage, dltKeyMessage, retryKeyMsg, c.errHdr)
	stack := first(dltStack, retryStack, connStacktrace, binderStack, dltKeyStack, retryKeyStack)
	e.ReasonCode = brokermsg.ExceptionCode([]string{fqcn, cause, connCl}, msg, stack)
	if msg == "" {
		// The class names something: "ClassName" alone is the error.
		for _, cl := range []string{cause, fqcn, connCl} {
			if cl != "" {
				msg = cl
				break
			}
		}
	}
	e.Message = brokermsg.Excerpt(msg, maxMessage)
	if hasHeader(r, brokermsg.HeaderCount) {
		labels = brokermsg.SetLineage(labels, str(brokermsg.HeaderKey), str(brokermsg.HeaderCount))
	} else if k := str(brokermsg.HeaderKey); k != "" {
		e.IdempotencyKey = k // the application's own key, preserved
	}
	brokermsg.ReadLineage(&e, str(brokermsg.HeaderLineage))
	e.Labels = labels
	if e.IdempotencyKey == "" {
		e.IdempotencyKey, e.KeyDerived = entry.DeriveKey(Kind, e.ID), true
	}
	e.Payload = appendEnvelope(nil, r, orig, origPart, origOff)
	return e
}

// numberPlain is number as first written.
func numberPlain(b []byte, size int) (int64, bool) {
	s := strings.TrimSpace(string(b))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && s != "" {
		return n, true
	}
	switch {
	case size == 4 && len(b) == 4:
		return int64(int32(binary.BigEndian.Uint32(b))), true
	case size == 8 && len(b) == 8:
		return int64(binary.BigEndian.Uint64(b)), true
	}
	return 0, false
}

// headerValue is the value of the record's last header named k.
func headerValue(r *kgo.Record, k string) []byte {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == k {
			return r.Headers[i].Value
		}
	}
	return nil
}

func hasHeader(r *kgo.Record, k string) bool {
	for i := range r.Headers {
		if r.Headers[i].Key == k {
			return true
		}
	}
	return false
}

// plainCases are records whose headers take every branch of entryOf.
func plainCases() []*kgo.Record {
	const wrapper = "org.springframework.kafka.listener.ListenerExecutionFailedException"
	long := strings.Repeat("é timed out ", 300)
	rs := []*kgo.Record{
		springDLT("a", `{"o":1}`, 0, 11, wrapper, "java.net.SocketTimeoutException", "Listener failed; Read timed out"),
		springDLT("b", `{"o":1}`, 2, 1<<40, wrapper, "java.net.SocketTimeoutException", "Listener failed; Read timed out"),
		springDLT("c", `{"o":`, 1, 12, "org.springframework.kafka.support.serializer.DeserializationException", "", ""),
		springDLT("d", "x", 0, 3, "", "", ""),
		springDLT("e", "x", 0, 3, "", "", long),
		{Topic: "orders.DLT", Partition: 1, Offset: 77, Key: []byte("connect"), Value: []byte{0xff, 0x01}, Headers: []kgo.RecordHeader{
			{Key: connTopic, Value: []byte("orders")},
			{Key: connPartition, Value: []byte(" 2 ")},
			{Key: connOffset, Value: []byte("99")},
			{Key: connClass, Value: []byte("org.apache.kafka.connect.errors.DataException")},
			{Key: connMessage, Value: []byte("Converting byte[] to Kafka Connect data failed due to serialization error")},
			{Key: connStacktrace, Value: []byte("x: y\nCaused by: org.apache.kafka.common.errors.SerializationException: bad magic byte\n")},
		}},
		{Topic: "payments-dlt", Offset: 5},
		{Topic: "payments.DLT", Offset: 6, Headers: []kgo.RecordHeader{{Key: dltPartition, Value: []byte("12x")}, {Key: dltOffset, Value: []byte("+7")}}},
		{Topic: "payments.DLT", Offset: 6, Headers: []kgo.RecordHeader{{Key: dltPartition, Value: []byte("-1")}, {Key: dltOffset, Value: []byte("99999999999999999999")}}},
		{Topic: "dlt", Offset: 8, Headers: []kgo.RecordHeader{{Key: dltTopic, Value: []byte("o\xffrig")}, {Key: dltPartition, Value: []byte{0, 0, 0}},
			{Key: dltOffset, Value: []byte{1, 2, 3, 4, 5, 6, 7, 8}}, {Key: dltCauseFQCN, Value: []byte("java.net.ConnectException")}}},
		{Topic: "orders.DLT", Offset: 9, Headers: []kgo.RecordHeader{{Key: brokermsg.HeaderKey, Value: []byte("app-key-1")}}},
		{Topic: "orders.DLT", Offset: 10, Headers: []kgo.RecordHeader{{Key: brokermsg.HeaderKey, Value: []byte("replayctl:abc")},
			{Key: brokermsg.HeaderCount, Value: []byte("3")}, {Key: brokermsg.HeaderLineage, Value: []byte(" kafka:orders.DLT/0/1 ")}}},
		{Topic: "orders.DLT", Offset: 11, Headers: []kgo.RecordHeader{{Key: brokermsg.HeaderCount, Value: []byte("x")}}},
		{Topic: strings.Repeat("t", 249) + ".DLT", Partition: 7, Offset: 1<<62 + 3},
		{Topic: "error.orders.billing", Offset: 12, Headers: []kgo.RecordHeader{{Key: binderTopic, Value: []byte("orders")},
			{Key: binderPartition, Value: be32(3)}, {Key: binderOffset, Value: be64(40)}, {Key: binderFQCN, Value: []byte("org.springframework.messaging.MessageHandlingException")},
			{Key: dltCauseFQCN, Value: []byte("java.net.SocketTimeoutException")}, {Key: binderMessage, Value: []byte("handler failed")},
			{Key: binderStack, Value: []byte("a: b\nCaused by: java.net.SocketTimeoutException: Read timed out\n")}}},
		{Topic: "orders.DLT", Offset: 13, Headers: []kgo.RecordHeader{{Key: dltTopic, Value: []byte("orders")},
			{Key: dltKeyFQCN, Value: []byte("org.springframework.kafka.support.serializer.DeserializationException")},
			{Key: dltKeyMessage, Value: []byte("failed to deserialize")}, {Key: dltKeyStack, Value: []byte("x\n")}}},
		// Spring Kafka's retry topics (@RetryableTopic): TOPIC-dlt.
		{Topic: "orders-dlt", Offset: 15, Headers: []kgo.RecordHeader{{Key: retryTopic, Value: []byte("orders")}, {Key: retryPartition, Value: be32(1)},
			{Key: retryOffset, Value: be64(8)}, {Key: retryFQCN, Value: []byte("org.springframework.kafka.listener.ListenerExecutionFailedException")},
			{Key: retryCauseFQCN, Value: []byte("java.net.ConnectException")}, {Key: retryMessage, Value: []byte("Listener failed")},
			{Key: retryStack, Value: []byte("x\n")}, {Key: "retry_topic-attempts", Value: be32(3)}}},
		{Topic: "orders-dlt", Offset: 16, Headers: []kgo.RecordHeader{{Key: retryKeyFQCN, Value: []byte("org.apache.kafka.common.errors.SerializationException")},
			{Key: retryKeyMsg, Value: []byte("bad key")}}},
		// The value's error wins over the key's and the binder's.
		{Topic: "orders.DLT", Offset: 14, Headers: []kgo.RecordHeader{{Key: dltKeyFQCN, Value: []byte("a.DeserializationException")},
			{Key: dltFQCN, Value: []byte("java.net.ConnectException")}, {Key: binderMessage, Value: []byte("binder")}, {Key: dltMessage, Value: []byte("value")}}},
	}
	// Timestamps: equal in bursts, apart, in another zone, zero.
	base := time.Date(2026, 11, 27, 10, 0, 0, 123000000, time.UTC)
	for i, r := range rs {
		switch i % 4 {
		case 0, 1:
			r.Timestamp = base
		case 2:
			r.Timestamp = base.Add(time.Duration(i) * time.Millisecond).In(time.FixedZone("x", 3600))
		}
	}
	return rs
}

func TestEntryOfMatchesPlain(t *testing.T) {
	conn, err := Open("kafka:127.0.0.1:9092?topic=orders.DLT&group=g")
	if err != nil {
		t.Fatal(err)
	}
	var memo converter
	rs := plainCases()
	// Twice over, so the memo is both hit and missed.
	rs = append(rs, rs...)
	var payloads [][]byte
	for _, r := range rs {
		payloads = append(payloads, samePlain(t, conn, r, &memo).Payload)
	}
	// The payloads share the converter's block: none was written over by
	// the next, and none can be appended to in place.
	for i, p := range payloads {
		if want := conn.entryOfPlain(rs[i]).Payload; !bytes.Equal(p, want) || cap(p) != len(p) {
			t.Fatalf("payload %d changed after later records: %s (cap %d), want %s", i, p, cap(p), want)
		}
	}
}

func samePlain(t *testing.T, conn *Conn, r *kgo.Record, memo *converter) entry.Entry {
	t.Helper()
	got, want := conn.entryOf(r, memo), conn.entryOfPlain(r)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("record %s/%d/%d:\n got %+v\nwant %+v", r.Topic, r.Partition, r.Offset, got, want)
	}
	return got
}

// FuzzEntryOfMatchesPlain: any headers map to the entry the plain
// converter makes, byte for byte in the payload.
func FuzzEntryOfMatchesPlain(f *testing.F) {
	f.Add("orders.DLT", int32(0), int64(1), "orders", []byte{0, 0, 0, 1}, []byte("7"), "java.net.SocketTimeoutException", "m", "s", "", "")
	f.Add("x-dlt", int32(3), int64(9), "", []byte(" 12 "), []byte{}, "", "", "", "k", "2")
	f.Fuzz(func(t *testing.T, topic string, part int32, off int64, orig string, p, o []byte, cause, msg, stack, key, count string) {
		if part < 0 || off < 0 {
			return
		}
		r := &kgo.Record{Topic: topic, Partition: part, Offset: off, Value: []byte(msg), Key: []byte(key), Timestamp: time.UnixMilli(off % (1 << 42))}
		// The partition and offset pick which names the headers go under:
		// Spring Kafka's, Kafka Connect's, the binder's, the key's.
		origin := [][3]string{{dltTopic, dltPartition, dltOffset}, {connTopic, connPartition, connOffset}, {binderTopic, binderPartition, binderOffset},
			{retryTopic, retryPartition, retryOffset}}[part%4]
		causeName := []string{dltCauseFQCN, dltFQCN, binderFQCN, dltKeyFQCN, retryFQCN, retryCauseFQCN, retryKeyFQCN}[off%7]
		msgName := []string{dltMessage, connMessage, binderMessage, dltKeyMessage, retryMessage, retryKeyMsg}[(off/7)%6]
		stackName := []string{connStacktrace, dltStack, binderStack, dltKeyStack, retryStack, retryKeyStack}[(part/4)%6]
		for _, h := range []struct {
			k string
			v []byte
		}{{origin[0], []byte(orig)}, {origin[1], p}, {origin[2], o}, {causeName, []byte(cause)}, {msgName, []byte(msg)},
			{stackName, []byte(stack)}, {brokermsg.HeaderKey, []byte(key)}, {brokermsg.HeaderCount, []byte(count)}} {
			if len(h.v) > 0 {
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.k, Value: h.v})
			}
		}
		conn, err := Open("kafka:127.0.0.1:9092?topic=orders.DLT&group=g")
		if err != nil {
			t.Fatal(err)
		}
		var memo converter
		samePlain(t, conn, r, &memo)
		samePlain(t, conn, r, &memo)
		r.Timestamp = r.Timestamp.Add(time.Nanosecond)
		samePlain(t, conn, r, &memo)
	})
}
