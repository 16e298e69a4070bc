package kafka

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/entry"
)

// TestEntriesOwnTheirBytes: the connector's client decodes fetched
// batches into fetchPool's buffers and a read hands every record back as
// soon as its entry is built; franz-go zeroes a batch's buffer once its
// last record is back and the next fetch decodes into it. Every entry a
// read yields, kept past that read and past a second read that reuses the
// buffers, is what the plain converter makes of the same record fetched
// by a client without pools: no entry holds a byte of a record.
func TestEntriesOwnTheirBytes(t *testing.T) {
	c := newCluster(t)
	const n = pollMax + 300 // two polls, batches that span them
	var rs []*kgo.Record
	for i := range n {
		r := springDLT(fmt.Sprint("k", i), fmt.Sprintf(`{"i":%d,"v":"%s"}`, i, strings.Repeat(string(rune('a'+i%26)), 200+i%300)),
			int32(i%3), int64(i), "x.ListenerExecutionFailedException", "java.net.SocketTimeoutException", fmt.Sprint("Read timed out ", i%7))
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: dltStack, Value: fmt.Appendf(nil, "x: y\n\tat a.B(B.java:%d)\n", i)})
		switch i % 5 {
		case 1: // the application's own key
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: brokermsg.HeaderKey, Value: fmt.Appendf(nil, "app-%d", i)})
		case 2: // a replay that came back: key, count and lineage
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: brokermsg.HeaderKey, Value: fmt.Appendf(nil, "replayctl:%032x", i)},
				kgo.RecordHeader{Key: brokermsg.HeaderCount, Value: []byte("2")},
				kgo.RecordHeader{Key: brokermsg.HeaderLineage, Value: fmt.Appendf(nil, "kafka:orders.DLT/0/%d", i)})
		}
		rs = append(rs, r)
	}
	c.produce(rs...)

	conn := c.open("")
	want := map[string]entry.Entry{}
	plain, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.addrs, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders.DLT": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	compressed := false
	for len(want) < n {
		f := plain.PollFetches(context.Background())
		if err := f.Err0(); err != nil {
			t.Fatal(err)
		}
		f.EachRecord(func(r *kgo.Record) {
			compressed = compressed || r.Attrs.CompressionType() != 0
			e := conn.entryOfPlain(r)
			want[e.ID] = e
		})
	}
	if !compressed {
		t.Fatal("the records were not compressed: a read decodes them in the fetch response, not in a pooled buffer")
	}

	check := func(what string, es []entry.Entry) {
		t.Helper()
		if len(es) != n {
			t.Fatalf("%s: read %d of %d", what, len(es), n)
		}
		for _, e := range es {
			if w := want[e.ID]; !reflect.DeepEqual(e, w) {
				t.Fatalf("%s: entry %s\n got %+v\nwant %+v", what, e.ID, e, w)
			}
		}
	}
	first := readAll(t, conn)
	check("first read", first)
	second := readAll(t, c.open(""))
	check("second read", second)
	check("first read after the second", first)
}
