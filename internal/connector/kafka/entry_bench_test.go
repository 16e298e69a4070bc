package kafka

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkEntryOf is the per-record cost of a read: a Spring DLT record
// with a 1 KB value and a stack trace, mapped to an entry.
func BenchmarkEntryOf(b *testing.B) {
	c, err := Open("kafka:127.0.0.1:9092?topic=orders.DLT&group=bench")
	if err != nil {
		b.Fatal(err)
	}
	r := springDLT("k1", `{"o":"`+strings.Repeat("x", 1000)+`"}`, 0, 7, "x.ListenerExecutionFailedException",
		"java.net.SocketTimeoutException", "Read timed out")
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: "kafka_dlt-exception-stacktrace",
		Value: []byte("x.ListenerExecutionFailedException: x\n" + strings.Repeat("\tat com.acme.Foo.bar(Foo.java:1)\n", 40) + "Caused by: java.net.SocketTimeoutException: Read timed out\n")})
	b.ReportAllocs()
	var memo converter
	for b.Loop() {
		_ = c.entryOf(r, &memo)
	}
}

// BenchmarkEntryOfBenchRecord is the per-record cost for the record the
// bench's DLT holds (internal/benchmark/brokers.go): a 920-byte JSON
// value, Spring's original-topic and a two-line stack trace.
func BenchmarkEntryOfBenchRecord(b *testing.B) {
	c, err := Open("kafka:127.0.0.1:9092?topic=orders.DLT&group=bench")
	if err != nil {
		b.Fatal(err)
	}
	r := &kgo.Record{Topic: "orders.DLT", Key: []byte("k17"), Offset: 17,
		Value: []byte(`{"order":17,"note":"` + strings.Repeat("x", 900) + `"}`),
		Headers: []kgo.RecordHeader{{Key: dltTopic, Value: []byte("orders")},
			{Key: dltStack, Value: []byte("x.ListenerExecutionFailedException: x\nCaused by: java.net.SocketTimeoutException: Read timed out\n")}}}
	b.ReportAllocs()
	var memo converter
	for b.Loop() {
		_ = c.entryOf(r, &memo)
	}
}
