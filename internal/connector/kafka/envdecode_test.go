package kafka

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/entry"
)

// benchEntry is a Spring DLT record with a 1 KB value and a stack trace,
// as entryOf stores it.
func benchEntry(tb testing.TB) entry.Entry {
	c, err := Open("kafka:127.0.0.1:9092?topic=orders.DLT&group=bench")
	if err != nil {
		tb.Fatal(err)
	}
	r := springDLT("k1", `{"o":"`+strings.Repeat("x", 1000)+`"}`, 0, 7, "x.ListenerExecutionFailedException",
		"java.net.SocketTimeoutException", "Read timed out")
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: "kafka_dlt-exception-stacktrace",
		Value: []byte("x.ListenerExecutionFailedException: \"x\"\n" + strings.Repeat("\tat com.acme.Foo.bar(Foo.java:1)\n", 40) + "Caused by: java.net.SocketTimeoutException: Read timed out\n")})
	var memo converter
	return c.entryOf(r, &memo)
}

// BenchmarkRecord is the per-replay cost of rebuilding the record from
// its stored envelope.
func BenchmarkRecord(b *testing.B) {
	e := benchEntry(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := record(&e, "k"); err != nil {
			b.Fatal(err)
		}
	}
}

// randEnvelope is an envelope as an older store wrote it: json.Marshal
// of the struct, with random (also non-UTF-8, also nil) bytes.
func randEnvelope(r *rand.Rand) []byte {
	bs := func() []byte {
		if r.IntN(5) == 0 {
			return nil
		}
		b := make([]byte, r.IntN(12))
		for i := range b {
			switch r.IntN(4) {
			case 0:
				b[i] = byte(r.IntN(256))
			case 1:
				b[i] = ("\"\\<>&/\n\x00\x7f")[r.IntN(9)]
			default:
				b[i] = byte('a' + r.IntN(26))
			}
		}
		if r.IntN(4) == 0 {
			b = append(b, "é😀\u2028"...)
		}
		return b
	}
	part, off := int32(r.IntN(9)), int64(r.IntN(99))
	env := envelope{Body: brokermsg.NewBody(bs()), Key: brokermsg.NewBin(bs()), Topic: "t.DLT",
		Timestamp: time.Unix(int64(r.IntN(1e9)), 0).UTC(), OriginalTopic: string(bs())}
	if r.IntN(2) == 0 {
		env.OriginalPartition, env.OriginalOffset = &part, &off
	}
	for range r.IntN(4) {
		env.Headers = append(env.Headers, header{Key: string(bs()), Value: brokermsg.NewBin(bs())})
	}
	b, err := json.Marshal(env)
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzEnvelopeDecodeMatchesEncodingJSON: for any bytes, the fast decoder
// either gives up or gives exactly what json.Unmarshal gives.
func FuzzEnvelopeDecodeMatchesEncodingJSON(f *testing.F) {
	e := benchEntry(f)
	f.Add([]byte(e.Payload))
	for _, r := range []*kgo.Record{
		springDLT("", "", 0, 0, "a", "b", "c"),
		{Topic: "t", Value: []byte{0xff, 0, 1}, Key: []byte{0xfe}, Headers: []kgo.RecordHeader{
			{Key: "__connect.errors.topic", Value: []byte("o")}, {Key: "n"}, {Key: "b", Value: []byte{0x80}}}},
	} {
		var memo converter
		c, _ := Open("kafka:127.0.0.1:9092?topic=t&group=g")
		f.Add([]byte(c.entryOf(r, &memo).Payload))
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		f.Add(randEnvelope(rnd))
	}
	for _, s := range []string{
		`{"original_topic":"o","body":"a\u00e9\ud83d\ude00\ud800x\udc00\\\/\b\f\n\r\t\"","key":{"text":"\ud800\ud800"}}`,
		`{"original_topic":"o","body":"a","body":"b","key":{"text":"a","base64":"YQ=="}}`,
		`{"ORIGINAL_TOPIC":"o","Body":"x","KEY":{"TEXT":"k"},"Headers":[{"KEY":"h","VALUE":{"Base64":"/w=="}}]}`,
		`{"original_topic":"o","body":null,"body_base64":"/w==","key":null,"headers":[null,{"key":null,"value":null}]}`,
		`{"original_topic":"o","headers":[{"key":"a","value":{"text":"1"}}],"headers":[{"value":{"base64":"YQ=="}}]}`,
		`{"original_topic":"o","key":{"text":"a"},"key":{"base64":"YQ=="}}`,
		`{"original_topic":"o","x":[1,-0.5e+3,true,false,null,{"a":[{}]}],"partition":1,"offset":-2,"timestamp":"2026-01-02T03:04:05.5Z"}`,
		`{"original_topic":"o","partition":1.0}`, `{"original_topic":"o","partition":4294967296}`,
		`{"original_topic":"o","timestamp":"yesterday"}`, `{"original_topic":"o","body_base64":"!!"}`,
		`{"original_topic":"o","body":"\xff\xfe\xed\xa0\x80"}`, `{"original_topic":"o"} x`, `{"original_topic":"o",}`,
		`{"o\u0072iginal_topic":"o"}`, "{\"original_topic\":\"\u212a\"}", `{"original_topic":"o","body":"a\u00"}`,
		`null`, `[]`, `{}`, `{"original_topic":01}`, ` {"original_topic" : "o" , "body" : "" } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := decodeEnvelope(data)
		if !ok {
			return
		}
		var env envelope
		if err := json.Unmarshal(data, &env); err != nil {
			t.Fatalf("fast path took %q; encoding/json: %v", data, err)
		}
		want := parts{topic: env.OriginalTopic}
		var err error
		if want.value, err = env.Bytes(); err != nil && err != brokermsg.ErrNoBody {
			t.Fatalf("fast path took %q; body: %v", data, err)
		}
		if want.key, err = env.Key.Bytes(); err != nil {
			t.Fatalf("fast path took %q; key: %v", data, err)
		}
		for _, h := range env.Headers {
			v, err := h.Value.Bytes()
			if err != nil {
				t.Fatalf("fast path took %q; header: %v", data, err)
			}
			want.headers = append(want.headers, kgo.RecordHeader{Key: h.Key, Value: v})
		}
		same := func(a, b []byte) bool { return bytes.Equal(a, b) && (a == nil) == (b == nil) }
		if got.topic != want.topic || !same(got.key, want.key) || !same(got.value, want.value) || len(got.headers) != len(want.headers) {
			t.Fatalf("%q: fast %+v, encoding/json %+v", data, got, want)
		}
		for i := range got.headers {
			if got.headers[i].Key != want.headers[i].Key || !same(got.headers[i].Value, want.headers[i].Value) {
				t.Fatalf("%q: header %d: fast %+v, encoding/json %+v", data, i, got.headers[i], want.headers[i])
			}
		}
	})
}

// TestEnvelopeDecodeTakesStoredEnvelopes: what entryOf and json.Marshal
// write goes the fast way (the fuzz target alone would pass a decoder
// that always gave up).
func TestEnvelopeDecodeTakesStoredEnvelopes(t *testing.T) {
	e := benchEntry(t)
	if _, ok := decodeEnvelope(e.Payload); !ok {
		t.Fatalf("fast path gave up on %s", e.Payload)
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		if b := randEnvelope(rnd); !func() bool { _, ok := decodeEnvelope(b); return ok }() {
			t.Fatalf("fast path gave up on %s", b)
		}
	}
	for _, s := range []string{
		`{"original_topic":"o","body":"a\u00e9\ud83d\ude00\ud800x\udc00\\\/\b\f\n\r\t\"","key":{"text":"\ud800\ud800"}}`,
		`{"ORIGINAL_TOPIC":"o","Body":"x","KEY":{"TEXT":"k"},"Headers":[{"KEY":"h","VALUE":{"Base64":"/w=="}}]}`,
		`{"original_topic":"o","body":null,"body_base64":"/w==","key":null,"headers":[null,{"key":null,"value":null}]}`,
	} {
		if _, ok := decodeEnvelope([]byte(s)); !ok {
			t.Fatalf("fast path gave up on %s", s)
		}
	}
}
