package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/entry"
)

// cluster is franz-go's in-process Kafka with an orders topic and its
// Spring-style dead-letter topic orders.DLT, 3 partitions each.
type cluster struct {
	t     *testing.T
	addrs string
	cl    *kgo.Client
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders", "orders.DLT"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := strings.Join(c.ListenAddrs(), ",")
	// Dead letters go to the partition the test names, as Spring's
	// recoverer sends them to the original record's partition.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &cluster{t: t, addrs: addrs, cl: cl}
}

func (c *cluster) open(extra string) *Conn {
	c.t.Helper()
	conn, err := Open("kafka:" + c.addrs + "?topic=orders.DLT&group=replayctl&wait=1s" + extra)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

func (c *cluster) produce(rs ...*kgo.Record) {
	c.t.Helper()
	if err := c.cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		c.t.Fatal(err)
	}
}

func be32(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }
func be64(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

// springDLT is a record as Spring Kafka's DeadLetterPublishingRecoverer
// writes it: the original key and value, partition and offset as
// big-endian binary (spring-projects/spring-kafka
// DeadLetterPublishingRecoverer.java, KafkaHeaders.DLT_ORIGINAL_PARTITION).
func springDLT(key, value string, partition int32, offset int64, fqcn, cause, msg string) *kgo.Record {
	return &kgo.Record{Topic: "orders.DLT", Partition: partition, Key: []byte(key), Value: []byte(value), Headers: []kgo.RecordHeader{
		{Key: "kafka_dlt-original-topic", Value: []byte("orders")},
		{Key: "kafka_dlt-original-partition", Value: be32(partition)},
		{Key: "kafka_dlt-original-offset", Value: be64(offset)},
		{Key: "kafka_dlt-exception-fqcn", Value: []byte(fqcn)},
		{Key: "kafka_dlt-exception-cause-fqcn", Value: []byte(cause)},
		{Key: "kafka_dlt-exception-message", Value: []byte(msg)},
		{Key: "trace-id", Value: []byte("t-1")},
		{Key: "trace-id", Value: []byte("t-2")}, // repeated keys are kept
	}}
}

func readAll(t *testing.T, c *Conn) []entry.Entry {
	t.Helper()
	var out []entry.Entry
	for e, err := range c.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func byKey(es []entry.Entry) map[string]entry.Entry {
	m := map[string]entry.Entry{}
	for _, e := range es {
		rec, err := record(&e, "k")
		if err != nil {
			panic(err)
		}
		m[string(rec.Key)] = e
	}
	return m
}

func TestReadClassifiesDLTRecords(t *testing.T) {
	c := newCluster(t)
	const wrapper = "org.springframework.kafka.listener.ListenerExecutionFailedException"
	c.produce(
		springDLT("timeout", `{"o":1}`, 0, 11, wrapper, "java.net.SocketTimeoutException", "Listener failed; Read timed out"),
		springDLT("poison", `{"o":`, 1, 12, "org.springframework.kafka.support.serializer.DeserializationException", "", "failed to deserialize"),
		springDLT("denied", `{"o":3}`, 2, 13, wrapper, "org.apache.kafka.common.errors.TopicAuthorizationException", "Not authorized"),
		springDLT("unknown", `{"o":4}`, 0, 14, wrapper, "java.lang.IllegalStateException", "order 4 has no customer"),
		// Kafka Connect's error reporter: string headers.
		&kgo.Record{Topic: "orders.DLT", Partition: 1, Key: []byte("connect"), Value: []byte{0xff, 0x01}, Headers: []kgo.RecordHeader{
			{Key: "__connect.errors.topic", Value: []byte("orders")},
			{Key: "__connect.errors.partition", Value: []byte("2")},
			{Key: "__connect.errors.offset", Value: []byte("99")},
			{Key: "__connect.errors.exception.class.name", Value: []byte("org.apache.kafka.connect.errors.DataException")},
			{Key: "__connect.errors.exception.message", Value: []byte("Converting byte[] to Kafka Connect data failed due to serialization error")},
			{Key: "__connect.errors.exception.stacktrace", Value: []byte("org.apache.kafka.connect.errors.DataException: x\nCaused by: org.apache.kafka.common.errors.SerializationException: bad magic byte\n")},
		}},
	)
	conn := c.open("")
	got := byKey(readAll(t, conn))
	cases := []struct {
		key, code, msg   string
		partition, offet string
	}{
		{"timeout", brokermsg.CodeTimeout, "Read timed out", "0", "11"},
		{"poison", brokermsg.CodeParse, "failed to deserialize", "1", "12"},
		{"denied", brokermsg.CodeDenied, "Not authorized", "2", "13"},
		{"unknown", "", "no customer", "0", "14"},
		{"connect", brokermsg.CodeParse, "serialization error", "2", "99"},
	}
	for _, tc := range cases {
		e, ok := got[tc.key]
		if !ok {
			t.Errorf("%s: not read", tc.key)
			continue
		}
		if e.ReasonCode != tc.code || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: code %q message %q, want %q containing %q", tc.key, e.ReasonCode, e.Message, tc.code, tc.msg)
		}
		if e.Topic != "orders" || e.Labels["kafka.original_partition"] != tc.partition || e.Labels["kafka.original_offset"] != tc.offet {
			t.Errorf("%s: topic %q labels %v", tc.key, e.Topic, e.Labels)
		}
		if _, p, off, ok := parseID(e.ID); !ok || !strings.HasPrefix(e.ID, "orders.DLT/") || p < 0 || off < 0 {
			t.Errorf("%s: id %q", tc.key, e.ID)
		}
	}
	if rec, _ := record(ptr(got["connect"]), "k"); rec == nil || string(rec.Value) != "\xff\x01" {
		t.Errorf("binary value not kept: %v", rec)
	}
	timeout := got["timeout"]
	if rec, _ := record(&timeout, "k"); rec == nil || len(rec.Headers) != 11 || string(rec.Headers[7].Value) != "t-2" {
		t.Errorf("headers not kept in order: %v", rec)
	} else if h := rec.Headers[10]; h.Key != "replayctl-lineage" || string(h.Value) != timeout.Ref() {
		// An entry of no lineage is the first member of its replays' lineage.
		t.Errorf("lineage stamp %s=%q, want %q", h.Key, h.Value, timeout.Ref())
	}
	if notes := strings.Join(conn.Notes(), "\n"); !strings.Contains(notes, "held 5 records") || !strings.Contains(notes, "read 5 of 5") {
		t.Errorf("notes: %s", notes)
	}
}

func ptr(e entry.Entry) *entry.Entry { return &e }

// The group's offset moves only past records whose entries are stored,
// without a gap: a record read but never stored is read again.
func TestCommitOnlyPastStoredRecords(t *testing.T) {
	c := newCluster(t)
	for i := range 4 {
		c.produce(springDLT(fmt.Sprint("k", i), "{}", 0, int64(i), "x.Y", "", "m"))
	}
	conn := c.open("")
	got := readAll(t, conn)
	if len(got) != 4 {
		t.Fatalf("read %d, want 4", len(got))
	}
	// Stored: the first, and the third and fourth; the second not (the
	// run was killed while it was in flight).
	for _, i := range []int{0, 2, 3} {
		if err := conn.markStored(context.Background(), &got[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	again := readAll(t, c.open(""))
	if len(again) != 3 || again[0].ID != got[1].ID {
		t.Fatalf("after a gap, read %v, want from %s on", idsOf(again), got[1].ID)
	}
	second := c.open("")
	rest := readAll(t, second)
	for i := range rest {
		if err := second.markStored(context.Background(), &rest[i]); err != nil {
			t.Fatal(err)
		}
	}
	if left := readAll(t, c.open("")); len(left) != 0 {
		t.Errorf("all stored, still read %v", idsOf(left))
	}
	// New dead letters after that are read, and only they.
	c.produce(springDLT("k9", "{}", 0, 9, "x.Y", "", "m"))
	if late := readAll(t, c.open("")); len(late) != 1 || !strings.HasSuffix(late[0].ID, "/0/4") {
		t.Errorf("read %v, want only orders.DLT/0/4", idsOf(late))
	}
}

func idsOf(es []entry.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

// Replay goes to the original topic with the same key (so the same
// partition), headers and stamps; one that fails again is linked.
func TestReplayToOriginalTopicAndLineage(t *testing.T) {
	c := newCluster(t)
	c.produce(springDLT("order-7", `{"o":7}`, 1, 70, "x.Y", "java.net.SocketTimeoutException", "timed out"))
	conn := c.open("")
	e := readAll(t, conn)[0]
	res := conn.Replay(context.Background(), connector.Request{Entry: &e, Key: e.IdempotencyKey, Attempt: 1})
	if res.Outcome != connector.Succeeded {
		t.Fatalf("replay: %v %s", res.Outcome, res.Detail)
	}
	// Where a plain producer puts the same key: the same partition.
	plain, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.addrs, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	probe := &kgo.Record{Topic: "orders", Key: []byte("order-7"), Value: []byte("probe")}
	if err := plain.ProduceSync(context.Background(), probe).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.addrs, ",")...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var replayed *kgo.Record
	deadline := time.Now().Add(10 * time.Second)
	for replayed == nil && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		for _, r := range consumer.PollFetches(ctx).Records() {
			if string(r.Value) == `{"o":7}` {
				replayed = r
			}
		}
		cancel()
	}
	if replayed == nil {
		t.Fatal("replayed record not on orders")
	}
	if string(replayed.Key) != "order-7" || replayed.Partition != probe.Partition {
		t.Errorf("replayed key %q partition %d, want order-7 on %d", replayed.Key, replayed.Partition, probe.Partition)
	}
	hdr := map[string]string{}
	for _, h := range replayed.Headers {
		hdr[h.Key] = string(h.Value)
	}
	if hdr[brokermsg.HeaderKey] != e.IdempotencyKey || hdr[brokermsg.HeaderCount] != "1" || hdr["trace-id"] != "t-2" {
		t.Errorf("replayed headers %v", hdr)
	}
	// It fails again: Spring dead-letters it with its headers.
	back := springDLT("order-7", `{"o":7}`, 1, 71, "x.Y", "java.net.SocketTimeoutException", "timed out")
	back.Headers = append(back.Headers, replayed.Headers...)
	c.produce(back)
	if err := conn.markStored(context.Background(), &e); err != nil {
		t.Fatal(err)
	}
	next := readAll(t, c.open(""))
	if len(next) != 1 {
		t.Fatalf("read %v, want the returning record", idsOf(next))
	}
	r := next[0]
	if r.ID == e.ID || r.Labels[brokermsg.LabelReplayOf] != e.IdempotencyKey || r.Labels[brokermsg.LabelReplayCount] != "1" || r.IdempotencyKey == e.IdempotencyKey {
		t.Errorf("returning entry %s labels %v key %s", r.ID, r.Labels, r.IdempotencyKey)
	}
	if rec, _ := record(&r, "k2"); rec == nil || countHeader(rec, brokermsg.HeaderKey) != 1 || lastHeader(rec, brokermsg.HeaderCount) != "2" {
		t.Errorf("a second replay's stamps: %v", rec)
	}
}

func countHeader(r *kgo.Record, k string) int {
	n := 0
	for _, h := range r.Headers {
		if h.Key == k {
			n++
		}
	}
	return n
}

func lastHeader(r *kgo.Record, k string) string {
	v := ""
	for _, h := range r.Headers {
		if h.Key == k {
			v = string(h.Value)
		}
	}
	return v
}

func TestReplayOutcomes(t *testing.T) {
	c := newCluster(t)
	c.produce(springDLT("a", "{}", 0, 1, "x.Y", "", "m"))
	conn := c.open("&timeout=2s")
	e := readAll(t, conn)[0]
	gone := e
	gone.Payload = []byte(strings.Replace(string(e.Payload), `"original_topic":"orders"`, `"original_topic":"no-such-topic"`, 1))
	if res := conn.Replay(context.Background(), connector.Request{Entry: &gone, Key: "k"}); res.Outcome != connector.Failed && res.Outcome != connector.NotSent {
		t.Errorf("replay to a missing topic: %v %s", res.Outcome, res.Detail)
	}
	none := e
	none.Payload = []byte(`{"body":"x"}`)
	if res := conn.Replay(context.Background(), connector.Request{Entry: &none, Key: "k"}); res.Outcome != connector.Failed {
		t.Errorf("replay without an original topic: %v %s", res.Outcome, res.Detail)
	}
	c2, err := Open("kafka:127.0.0.1:1?topic=orders.DLT&group=g&timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if res := c2.Replay(context.Background(), connector.Request{Entry: &e, Key: "k"}); res.Outcome != connector.NotSent || !res.TargetDown {
		t.Errorf("replay to a cluster that is down: %v %s", res.Outcome, res.Detail)
	}
}

func TestSpec(t *testing.T) {
	c, err := Open("kafka:b1:9092,b2:9092?topic=orders.DLT&group=replayctl")
	if err != nil || len(c.brokers) != 2 || c.topic != "orders.DLT" || c.group != "replayctl" {
		t.Fatalf("%+v %v", c, err)
	}
	if back, err := Open(c.Origin()); err != nil || back.topic != c.topic {
		t.Errorf("Origin %q does not open again: %v", c.Origin(), err)
	}
	for _, bad := range []string{"kafka:?topic=t&group=g", "kafka:b:9092?group=g", "kafka:b:9092?topic=t", "kafka:b?topic=t&group=g", "kafka:b:1?topic=t&group=g&wait=x"} {
		if _, err := Open(bad); err == nil {
			t.Errorf("Open(%q) accepted", bad)
		}
	}
	for _, tc := range []struct {
		in   []byte
		size int
		want int64
	}{{be32(7), 4, 7}, {be64(1 << 40), 8, 1 << 40}, {[]byte("1234"), 4, 1234}, {[]byte("99"), 8, 99}} {
		if n, ok := number(tc.in, tc.size); !ok || n != tc.want {
			t.Errorf("number(%q) = %d %v, want %d", tc.in, n, ok, tc.want)
		}
	}
}

// A read of more records than one poll takes (pollMax) over three
// partitions is complete, yields each partition's records in offset
// order, and once they are all stored the group's offsets are past them:
// the next read finds nothing.
func TestReadAcrossPolls(t *testing.T) {
	c := newCluster(t)
	const n = 3*pollMax + 7
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, springDLT(fmt.Sprint("k", i), fmt.Sprintf(`{"i":%d}`, i), int32(i%3), int64(i), "x.W", "java.net.SocketTimeoutException", "Read timed out"))
	}
	c.produce(rs...)
	conn := c.open("")
	got := readAll(t, conn)
	if len(got) != n {
		t.Fatalf("read %d of %d", len(got), n)
	}
	last := map[int32]int64{0: -1, 1: -1, 2: -1}
	for i := range got {
		_, p, off, ok := parseID(got[i].ID)
		if !ok || off <= last[p] {
			t.Fatalf("entry %d: %s after offset %d of its partition", i, got[i].ID, last[p])
		}
		last[p] = off
		conn.Stored(context.Background(), &got[i])
	}
	if notes := strings.Join(conn.Notes(), "\n"); !strings.Contains(notes, fmt.Sprintf("read %d of %d", n, n)) || strings.Contains(notes, "commit") {
		t.Fatalf("notes:\n%s", notes)
	}
	if again := readAll(t, c.open("")); len(again) != 0 {
		t.Fatalf("read %d again after every record was stored", len(again))
	}
}

// TestCommitNeverPassesAnUnstoredRecord: records are fetched and turned
// into entries a poll ahead of the caller, and a poll's offsets are
// pending before its first entry is yielded. A run that stores each
// entry as it comes (commits go out every commitEvery records) and stops
// in the middle of a poll commits exactly past what it stored, on every
// partition: the next run starts at the first record not stored. The
// same Conn then reads again on the same client and takes the rest.
func TestCommitNeverPassesAnUnstoredRecord(t *testing.T) {
	c := newCluster(t)
	const n = 2*pollMax + 300
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, springDLT(fmt.Sprint("k", i), fmt.Sprintf(`{"i":%d}`, i), int32(i%3), int64(i), "x.W", "java.net.SocketTimeoutException", "Read timed out"))
	}
	c.produce(rs...)
	conn := c.open("")
	stop := pollMax + 517 // inside the second poll
	next := map[int32]int64{}
	k := 0
	for e, err := range conn.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		conn.Stored(context.Background(), &e)
		_, p, off, _ := parseID(e.ID)
		next[p] = off + 1
		if k++; k == stop {
			break
		}
	}
	if err := conn.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	again := c.open("")
	first := map[int32]int64{}
	rest := 0
	for e, err := range again.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		_, p, off, _ := parseID(e.ID)
		if _, ok := first[p]; !ok {
			first[p] = off
		}
		rest++
	}
	if rest != n-stop {
		t.Fatalf("the next run read %d, want the %d not stored", rest, n-stop)
	}
	for p, want := range next {
		if _, ok := first[p]; !ok && want == int64((n+2-int(p))/3) {
			continue // read and stored to its end
		}
		if first[p] != want {
			t.Errorf("partition %d: the next run starts at %d, want %d (the first record not stored)", p, first[p], want)
		}
	}
	// The first Conn reads again from its own commits, on its one client.
	if more := readAll(t, conn); len(more) != n-stop {
		t.Errorf("the same Conn read %d on its second read, want %d", len(more), n-stop)
	}
}

// TestClassMemoFollowsEachRecord: a converter remembers its last
// classification; records whose exception headers differ in any one
// field are classified afresh, as a converter without the memo would.
func TestClassMemoFollowsEachRecord(t *testing.T) {
	conn, err := Open("kafka:127.0.0.1:9092?topic=orders.DLT&group=g")
	if err != nil {
		t.Fatal(err)
	}
	const wrapper = "org.springframework.kafka.listener.ListenerExecutionFailedException"
	rs := []*kgo.Record{
		springDLT("a", "{}", 0, 1, wrapper, "java.net.SocketTimeoutException", "Read timed out"),
		springDLT("b", "{}", 0, 2, wrapper, "java.net.SocketTimeoutException", "Read timed out"),
		springDLT("c", "{}", 0, 3, wrapper, "org.apache.kafka.common.errors.TopicAuthorizationException", "Read timed out"),
		springDLT("d", "{}", 0, 4, wrapper, "", "connection refused"),
		springDLT("e", "{}", 0, 5, wrapper, "", "Read timed out"),
		springDLT("f", "{}", 0, 6, wrapper, "java.net.SocketTimeoutException", "Read timed out"),
	}
	var memo converter
	for _, r := range rs {
		var fresh converter
		got, want := conn.entryOf(r, &memo).ReasonCode, conn.entryOf(r, &fresh).ReasonCode
		if got != want {
			t.Errorf("record %s: %q with the memo, %q without", r.Key, got, want)
		}
	}
	if codes := []string{conn.entryOf(rs[2], &memo).ReasonCode, conn.entryOf(rs[3], &memo).ReasonCode}; codes[0] != brokermsg.CodeDenied || codes[1] != brokermsg.CodeUnavailable {
		t.Errorf("codes %v, want %s then %s", codes, brokermsg.CodeDenied, brokermsg.CodeUnavailable)
	}
}
