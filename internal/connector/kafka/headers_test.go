package kafka

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector/brokermsg"
)

// Spring Cloud Stream's Kafka binder dead-letters a record (enableDlq,
// topic error.<destination>.<group>) through Spring Kafka's
// DeadLetterPublishingRecoverer with its own header names
// (spring-cloud/spring-cloud-stream binders/kafka-binder
// KafkaMessageChannelBinder.java: X_ORIGINAL_TOPIC "x-original-topic",
// X_ORIGINAL_PARTITION, X_ORIGINAL_OFFSET, X_EXCEPTION_FQCN
// "x-exception-fqcn", X_EXCEPTION_MESSAGE, X_EXCEPTION_STACKTRACE; the
// partition a 4-byte and the offset an 8-byte big-endian number, as the
// recoverer writes them). A key that failed to deserialize is reported
// in Spring Kafka's key-exception headers instead of the value's
// (spring-projects/spring-kafka KafkaHeaders.java DLT_KEY_EXCEPTION_FQCN
// "kafka_dlt-key-exception-fqcn", _MESSAGE, _STACKTRACE, since 2.7).
// Spring Kafka's non-blocking retries (@RetryableTopic, DLT TOPIC-dlt)
// name them without "dlt-" (spring-kafka retrytopic
// DeadLetterPublishingRecovererFactory.java getHeaderNames:
// KafkaHeaders.ORIGINAL_TOPIC "kafka_original-topic", EXCEPTION_FQCN
// "kafka_exception-fqcn", EXCEPTION_CAUSE_FQCN, KEY_EXCEPTION_*), the
// original being the main topic the record first failed on.
func TestReadsBinderRetryTopicAndKeyExceptionHeaders(t *testing.T) {
	conn, err := Open("kafka:127.0.0.1:9092?topic=error.orders.billing&group=replayctl")
	if err != nil {
		t.Fatal(err)
	}
	binder := &kgo.Record{Topic: "error.orders.billing", Partition: 0, Offset: 4, Key: []byte("o-1"), Value: []byte(`{"order":1}`),
		Headers: []kgo.RecordHeader{
			{Key: "x-original-topic", Value: []byte("orders")},
			{Key: "x-original-partition", Value: be32(2)},
			{Key: "x-original-offset", Value: be64(917)},
			{Key: "x-exception-fqcn", Value: []byte("org.springframework.messaging.MessageHandlingException")},
			{Key: "x-exception-message", Value: []byte("error occurred in message handler; Read timed out")},
			{Key: "x-exception-stacktrace", Value: []byte("org.springframework.messaging.MessageHandlingException: x\n\tat a.b(C.java:1)\nCaused by: java.net.SocketTimeoutException: Read timed out\n")},
		}}
	keyFail := springDLT("", `{"order":2}`, 1, 31, "", "", "")
	keyFail.Headers = append(keyFail.Headers[:3],
		kgo.RecordHeader{Key: "kafka_dlt-key-exception-fqcn", Value: []byte("org.springframework.kafka.support.serializer.DeserializationException")},
		kgo.RecordHeader{Key: "kafka_dlt-key-exception-message", Value: []byte("failed to deserialize; nested exception is java.lang.NumberFormatException")},
		kgo.RecordHeader{Key: "kafka_dlt-key-exception-stacktrace", Value: []byte("org.springframework.kafka.support.serializer.DeserializationException: failed to deserialize\n")})
	retry := &kgo.Record{Topic: "orders-dlt", Offset: 9, Key: []byte("o-3"), Value: []byte(`{"order":3}`),
		Headers: []kgo.RecordHeader{
			{Key: "kafka_original-topic", Value: []byte("orders")},
			{Key: "kafka_original-partition", Value: be32(1)},
			{Key: "kafka_original-offset", Value: be64(8)},
			{Key: "kafka_exception-fqcn", Value: []byte("org.springframework.kafka.listener.ListenerExecutionFailedException")},
			{Key: "kafka_exception-cause-fqcn", Value: []byte("java.net.ConnectException")},
			{Key: "kafka_exception-message", Value: []byte("Listener method threw exception; Connection refused")},
			{Key: "retry_topic-attempts", Value: be32(3)},
		}}
	for _, tc := range []struct {
		name        string
		r           *kgo.Record
		topic, part string
		off, code   string
		msg         string
	}{
		{"binder", binder, "orders", "2", "917", brokermsg.CodeTimeout, "Read timed out"},
		{"key exception", keyFail, "orders", "1", "31", brokermsg.CodeParse, "failed to deserialize"},
		{"retry topic", retry, "orders", "1", "8", brokermsg.CodeUnavailable, "Connection refused"},
	} {
		var cv converter
		e := conn.entryOf(tc.r, &cv)
		if e.Topic != tc.topic || e.Labels["kafka.original_partition"] != tc.part || e.Labels["kafka.original_offset"] != tc.off {
			t.Errorf("%s: topic %q partition %q offset %q, want %q %q %q", tc.name, e.Topic,
				e.Labels["kafka.original_partition"], e.Labels["kafka.original_offset"], tc.topic, tc.part, tc.off)
		}
		if e.ReasonCode != tc.code || e.Message == "" || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: code %q message %q, want %q with %q", tc.name, e.ReasonCode, e.Message, tc.code, tc.msg)
		}
		if plain := conn.entryOfPlain(tc.r); plain.ReasonCode != e.ReasonCode || plain.Topic != e.Topic || plain.Message != e.Message {
			t.Errorf("%s: entryOfPlain says %q %q %q", tc.name, plain.ReasonCode, plain.Topic, plain.Message)
		}
	}
}

// error_header names a header that holds the application's error when
// none of the known ones does (as rabbitmq's error_header and sqs's
// error_attribute): its text goes to the message patterns.
func TestErrorHeaderNamesTheApplicationsError(t *testing.T) {
	r := &kgo.Record{Topic: "payments.DLT", Offset: 3, Headers: []kgo.RecordHeader{{Key: "app-error", Value: []byte("upstream said: connection refused")}}}
	for _, tc := range []struct {
		spec, code, msg string
	}{
		{"kafka:127.0.0.1:9092?topic=payments.DLT&group=g", "", ""},
		{"kafka:127.0.0.1:9092?topic=payments.DLT&group=g&error_header=app-error", brokermsg.CodeUnavailable, "upstream said: connection refused"},
	} {
		conn, err := Open(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		var cv converter
		if e := conn.entryOf(r, &cv); e.ReasonCode != tc.code || e.Message != tc.msg {
			t.Errorf("%s: code %q message %q, want %q %q", tc.spec, e.ReasonCode, e.Message, tc.code, tc.msg)
		}
		if strings.Contains(conn.Origin(), "error_header") {
			t.Errorf("origin %q keeps a read-only option", conn.Origin())
		}
	}
}
