package kafka

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector/brokermsg"
)

// marshalled is the envelope as json.Marshal writes it: the reference
// the hand-written appendEnvelope must decode the same as.
func marshalled(r *kgo.Record, orig string, part *int32, off *int64) []byte {
	env := envelope{Body: brokermsg.NewBody(r.Value), Key: brokermsg.NewBin(r.Key), Topic: r.Topic, Partition: r.Partition,
		Offset: r.Offset, Timestamp: r.Timestamp.UTC(), OriginalTopic: orig, OriginalPartition: part, OriginalOffset: off}
	for _, h := range r.Headers {
		env.Headers = append(env.Headers, header{Key: h.Key, Value: brokermsg.NewBin(h.Value)})
	}
	b, err := json.Marshal(env)
	if err != nil {
		panic(err)
	}
	return b
}

func TestAppendEnvelopeDecodesAsMarshal(t *testing.T) {
	p, o := int32(3), int64(42)
	ts := time.Date(2026, 11, 27, 9, 0, 0, 5, time.FixedZone("x", 3600))
	for _, c := range []struct {
		name string
		r    *kgo.Record
		orig string
		part *int32
		off  *int64
	}{
		{"spring", springDLT("k1", `{"a":"<b> & \"c\""}`, 0, 7, "x.Wrapper", "java.net.SocketTimeoutException", "Read timed out"), "orders", &p, &o},
		{"null key and value", &kgo.Record{Topic: "t.DLT", Offset: 9, Timestamp: ts}, "", nil, nil},
		{"binary", &kgo.Record{Topic: "t.DLT", Key: []byte{0xff, 0}, Value: []byte{0x00, 0xfe, 'a'}, Timestamp: ts,
			Headers: []kgo.RecordHeader{{Key: "bin", Value: []byte{0x80}}, {Key: "nil"}, {Key: "ctl\n\"", Value: []byte("tab\there")}}}, "o\xffrig", nil, &o},
		{"empty key and headers", &kgo.Record{Topic: "t.DLT", Key: []byte{}, Value: []byte{}, Headers: []kgo.RecordHeader{{Key: "", Value: []byte{}}}}, "t", &p, nil},
	} {
		got := appendEnvelope(nil, c.r, c.orig, c.part, c.off)
		var ours, std envelope
		if err := json.Unmarshal(got, &ours); err != nil {
			t.Fatalf("%s: %s: %v", c.name, got, err)
		}
		want := marshalled(c.r, c.orig, c.part, c.off)
		if err := json.Unmarshal(want, &std); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ours, std) {
			t.Errorf("%s: appendEnvelope\n %s\nbut json.Marshal\n %s", c.name, got, want)
		}
		// And the replay rebuilds the record's bytes from it.
		v, err := ours.Bytes()
		if err != nil || string(v) != string(c.r.Value) {
			t.Errorf("%s: body %q, %v; want %q", c.name, v, err, c.r.Value)
		}
	}
}
