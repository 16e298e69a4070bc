package kafka

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/entry"
)

// Kind is the source kind of the entries this connector reads.
const Kind = "kafka"

// Defaults of the spec's options.
const (
	DefaultWait    = 5 * time.Second
	DefaultTimeout = 30 * time.Second
)

// Spring Kafka's dead-letter headers (spring-projects/spring-kafka
// KafkaHeaders.java, DLT_*: partition a 4-byte and offset an 8-byte
// big-endian number) and Kafka Connect's error-reporting headers
// (apache/kafka connect/runtime .../errors/DeadLetterQueueReporter.java,
// strings).
const (
	dltTopic       = "kafka_dlt-original-topic"
	dltPartition   = "kafka_dlt-original-partition"
	dltOffset      = "kafka_dlt-original-offset"
	dltFQCN        = "kafka_dlt-exception-fqcn"
	dltCauseFQCN   = "kafka_dlt-exception-cause-fqcn"
	dltMessage     = "kafka_dlt-exception-message"
	dltStack       = "kafka_dlt-exception-stacktrace"
	connTopic      = "__connect.errors.topic"
	connPartition  = "__connect.errors.partition"
	connOffset     = "__connect.errors.offset"
	connClass      = "__connect.errors.exception.class.name"
	connMessage    = "__connect.errors.exception.message"
	connStacktrace = "__connect.errors.exception.stacktrace"

	// A key that failed to deserialize: Spring Kafka writes its error
	// under these names instead of the value's (KafkaHeaders.java
	// DLT_KEY_EXCEPTION_*, since 2.7).
	dltKeyFQCN    = "kafka_dlt-key-exception-fqcn"
	dltKeyMessage = "kafka_dlt-key-exception-message"
	dltKeyStack   = "kafka_dlt-key-exception-stacktrace"

	// Spring Kafka's non-blocking retries (@RetryableTopic, DLT
	// TOPIC-dlt) publish through DeadLetterPublishingRecovererFactory
	// under KafkaHeaders' names without "dlt-" (ORIGINAL_*, EXCEPTION_*,
	// KEY_EXCEPTION_*), the original being the first topic the record
	// failed on.
	retryTopic     = "kafka_original-topic"
	retryPartition = "kafka_original-partition"
	retryOffset    = "kafka_original-offset"
	retryFQCN      = "kafka_exception-fqcn"
	retryCauseFQCN = "kafka_exception-cause-fqcn"
	retryMessage   = "kafka_exception-message"
	retryStack     = "kafka_exception-stacktrace"
	retryKeyFQCN   = "kafka_key-exception-fqcn"
	retryKeyMsg    = "kafka_key-exception-message"
	retryKeyStack  = "kafka_key-exception-stacktrace"

	// Spring Cloud Stream's Kafka binder dead-letters (enableDlq, topic
	// error.DESTINATION.GROUP) through the same recoverer with its own
	// names for the original and the exception
	// (spring-cloud/spring-cloud-stream KafkaMessageChannelBinder.java
	// X_ORIGINAL_*, X_EXCEPTION_*; the cause and key exception keep
	// Spring Kafka's): partition and offset are binary there too.
	binderTopic     = "x-original-topic"
	binderPartition = "x-original-partition"
	binderOffset    = "x-original-offset"
	binderFQCN      = "x-exception-fqcn"
	binderMessage   = "x-exception-message"
	binderStack     = "x-exception-stacktrace"
)

// Conn is one Kafka dead-letter topic read under one consumer group. It
// implements connector.Connector.
type Conn struct {
	spec    string
	origin  string
	brokers []string
	topic   string
	group   string
	wait    time.Duration
	timeout time.Duration
	sec     security // tls, sasl (auth.go)
	errHdr  string   // error_header: a header holding the application's error

	mu       sync.Mutex
	admin    *kgo.Client
	producer *kgo.Client
	parts    map[int32]*partTrack
	notes    []string
}

// partTrack is what a partition's read yielded and the store took.
type partTrack struct {
	pending   []int64 // yielded offsets not yet committed, in order
	stored    map[int64]bool
	committed int64 // the offset last committed (the next to read)
	next      int64 // the offset past every stored record without a gap
	end       int64 // the end offset when the read began
}

var _ connector.Connector = (*Conn)(nil)

// Open parses a kafka: spec; SASL credentials come from the environment
// (KAFKA_USERNAME, KAFKA_PASSWORD).
func Open(spec string) (*Conn, error) { return OpenEnv(spec, os.Getenv) }

// OpenEnv is Open with the environment read through getenv.
func OpenEnv(spec string, getenv func(string) string) (*Conn, error) {
	rest, ok := strings.CutPrefix(spec, Kind+":")
	if !ok {
		return nil, fmt.Errorf("want %s:HOST:PORT[,HOST:PORT...]?topic=DLT_TOPIC&group=GROUP", Kind)
	}
	hosts, query, _ := strings.Cut(rest, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("bad query %q: %w", query, err)
	}
	c := &Conn{spec: spec, topic: q.Get("topic"), group: q.Get("group"), wait: DefaultWait, timeout: DefaultTimeout,
		errHdr: q.Get("error_header"), parts: map[int32]*partTrack{}}
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(strings.TrimPrefix(h, "//"))
		if h == "" {
			continue
		}
		if _, port, ok := strings.Cut(h, ":"); !ok || port == "" || strings.ContainsAny(h, "/@") {
			return nil, fmt.Errorf("broker %q: want HOST:PORT", h)
		}
		c.brokers = append(c.brokers, h)
	}
	switch {
	case len(c.brokers) == 0:
		return nil, errors.New("no broker: want HOST:PORT[,HOST:PORT...]")
	case c.topic == "":
		return nil, errors.New("missing ?topic=DLT_TOPIC (the dead-letter topic to read)")
	case c.group == "":
		return nil, errors.New("missing &group=GROUP (replayctl's own consumer group: its committed offsets say what was stored)")
	}
	for name, dst := range map[string]*time.Duration{"wait": &c.wait, "timeout": &c.timeout} {
		if v := q.Get(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%s=%q: want a positive duration such as 5s", name, v)
			}
			*dst = d
		}
	}
	if c.sec, err = parseSecurity(q, getenv); err != nil {
		return nil, err
	}
	oq := url.Values{"topic": {c.topic}, "group": {c.group}}
	c.sec.query(oq)
	c.origin = Kind + ":" + strings.Join(c.brokers, ",") + "?" + oq.Encode()
	return c, nil
}

// String is the spec as given (it holds no credentials).
func (c *Conn) String() string { return c.spec }

// Origin is where this connector's entries say they were read; Open
// takes it again.
func (c *Conn) Origin() string { return c.origin }

// Destination names where a replay of e goes: its original topic on this
// cluster. A run's breaker and --rate are per route, and a broker entry's
// route is its destination (issue 28: per queue or topic, not per
// connector).
func (c *Conn) Destination(e *entry.Entry) string {
	return Kind + ":" + strings.Join(c.brokers, ",") + "?" + url.Values{"topic": {e.Topic}}.Encode()
}

// Notes says how many records the DLT held and how many were read.
func (c *Conn) Notes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.notes)
}

func (c *Conn) note(format string, a ...any) {
	c.mu.Lock()
	c.notes = append(c.notes, fmt.Sprintf(format, a...))
	c.mu.Unlock()
}

// client is the connector's one client for offsets, commits and reads:
// a read consumes on it (AddConsumePartitions) once the offsets are
// known, so it pays no second dial and no second metadata request.
func (c *Conn) client() (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.admin == nil {
		o, err := c.readOpts()
		if err != nil {
			return nil, err
		}
		cl, err := kgo.NewClient(append(o, kgo.WithPools(fetchPool))...)
		if err != nil {
			return nil, err
		}
		c.admin = cl
	}
	return c.admin, nil
}

// readOpts are the options of a client that reads the DLT (client adds
// fetchPool; the bare read of the benches uses these alone).
func (c *Conn) readOpts() ([]kgo.Opt, error) {
	o, err := c.opts()
	if err != nil {
		return nil, err
	}
	return append(o, kgo.FetchIsolationLevel(kgo.ReadCommitted())), nil
}

func (c *Conn) adminClient() (*kadm.Client, error) {
	cl, err := c.client()
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// Close commits what the store has taken and ends the clients.
func (c *Conn) Close() error {
	err := c.flush(context.Background())
	c.mu.Lock()
	admin, producer := c.admin, c.producer
	c.admin, c.producer = nil, nil
	c.mu.Unlock()
	if producer != nil {
		producer.Close()
	}
	if admin != nil {
		admin.Close()
	}
	return err
}

// Entries reads every record past the group's committed offsets up to
// the end offsets the read began with.
func (c *Conn) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		fail := func(err error) { yield(entry.Entry{}, fmt.Errorf("kafka topic %s: %w", c.topic, c.redact(err))) }
		cl, err := c.client()
		if err != nil {
			fail(err)
			return
		}
		starts, ends, committed, err := c.offsets(ctx, kadm.NewClient(cl))
		if err != nil {
			fail(err)
			return
		}
		from := map[int32]kgo.Offset{}
		want := map[int32]int64{} // partition -> end offset still to reach
		held := int64(0)
		c.mu.Lock()
		for p, lo := range starts[c.topic] {
			start := lo.Offset
			if o, ok := committed.Lookup(c.topic, p); ok && o.At >= start {
				start = o.At
			}
			end := ends[c.topic][p].Offset
			c.parts[p] = &partTrack{stored: map[int64]bool{}, committed: start, next: start, end: end}
			if end > start {
				from[p] = kgo.NewOffset().At(start)
				want[p] = end
				held += end - start
			}
		}
		c.mu.Unlock()
		c.note("kafka topic %s held %d records past group %s's offsets when the read began", c.topic, held, c.group)
		if held == 0 {
			return
		}
		c.consume(ctx, cl, from, want, held, yield)
	}
}

// offsets asks the three questions a read begins with at once (each is a
// round trip, and kadm's list calls each fetch metadata first): where the
// topic's partitions start and end, and where the group committed.
func (c *Conn) offsets(ctx context.Context, adm *kadm.Client) (starts, ends kadm.ListedOffsets, committed kadm.OffsetResponses, err error) {
	var errStart, errEnd, errGroup error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if starts, errStart = adm.ListStartOffsets(ctx, c.topic); errStart == nil {
			errStart = starts.Error()
		}
	}()
	go func() {
		defer wg.Done()
		if ends, errEnd = adm.ListEndOffsets(ctx, c.topic); errEnd == nil {
			errEnd = ends.Error()
		}
	}()
	if committed, errGroup = adm.FetchOffsets(ctx, c.group); errGroup == nil {
		errGroup = committed.Error()
	}
	if errors.Is(errGroup, kerr.GroupIDNotFound) {
		committed, errGroup = nil, nil // a group that never committed: read from the start
	}
	wg.Wait()
	switch {
	case errStart != nil:
		return nil, nil, nil, fmt.Errorf("list start offsets: %w", errStart)
	case errEnd != nil:
		return nil, nil, nil, fmt.Errorf("list end offsets: %w", errEnd)
	case errGroup != nil:
		return nil, nil, nil, fmt.Errorf("fetch the offsets of group %s: %w", c.group, errGroup)
	}
	return starts, ends, committed, nil
}

// batch is one poll's records, converted to entries off the reader's
// goroutine: es[i] is the record at offset offs[i] of partition parts[i].
type batch struct {
	es    []entry.Entry
	parts []int32
	offs  []int64
	err   error
}

// batches holds the slices of yielded batches, cleared, for the polls of
// any read to convert into: a poll's thousand entries were a 330 KB
// allocation to zero and for the collector to scan, two a read.
var batches = sync.Pool{New: func() any { return new(batch) }}

// fetchPool lends franz-go (kgo.WithPools) the buffers it decompresses
// fetched batches into and the records it decodes them to: a read hands
// each record back (Record.Recycle) once its entry is built, and when a
// batch's records are all back its buffer and records serve the next
// fetch, of this read or the next. Fresh ones were a quarter of what a
// read allocated (2.4 MB of 10.5 for the bench's 2000 records), and every
// allocated byte brings the next collection nearer. An entry copies what
// it keeps of a record (the payload into its block, the strings through
// one buffer), so no entry holds a recycled byte.
var fetchPool = new(recordPool)

type recordPool struct{ bufs, recs sync.Pool }

// GetDecompressBytes returns a buffer the last batches were decompressed
// into; a batch that does not fit gets a new one, which comes back
// instead.
func (p *recordPool) GetDecompressBytes([]byte, kgo.CompressionCodecType) []byte {
	if b, ok := p.bufs.Get().(*[]byte); ok {
		return *b
	}
	return nil
}

func (p *recordPool) PutDecompressBytes(b []byte) { p.bufs.Put(&b) }

func (p *recordPool) GetRecords(int) []kgo.Record {
	if r, ok := p.recs.Get().(*[]kgo.Record); ok {
		return *r
	}
	return nil
}

func (p *recordPool) PutRecords(r []kgo.Record) { p.recs.Put(&r) }

// consume reads the partitions in from up to the offsets in want. One
// goroutine polls and converts the records to entries (in parallel when a
// poll brings many) while the caller's goroutine yields the previous
// poll's: a read is bounded by the fetch or by the caller's stores, not by
// building entries. At most three polls (pollMax records each) are in
// memory at once: one yielded, one waiting, one converting.
func (c *Conn) consume(ctx context.Context, cl *kgo.Client, from map[int32]kgo.Offset, want map[int32]int64, held int64, yield func(entry.Entry, error) bool) {
	fail := func(err error) { yield(entry.Entry{}, fmt.Errorf("kafka topic %s: %w", c.topic, c.redact(err))) }
	parts := make([]int32, 0, len(from))
	for p := range from {
		parts = append(parts, p)
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{c.topic: from})
	// Once the poll goroutine has stopped, the client stops fetching and
	// drops what it buffered: the next read starts from its own offsets.
	defer cl.RemoveConsumePartitions(map[string][]int32{c.topic: parts})
	rctx, stop := context.WithCancel(ctx)
	out := make(chan *batch, 1)
	complete := false
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		complete = c.poll(rctx, cl, want, held, out)
	}()
	defer wg.Wait()
	defer stop()
	read := 0
	for b := range out {
		if b.err != nil {
			fail(fmt.Errorf("fetch after %d records: %w", read, b.err))
			return
		}
		// The batch's offsets are pending before any of its entries is
		// yielded: an offset not yet yielded is not stored, so it holds
		// the commit back as a yielded one does.
		c.mu.Lock()
		for i := range b.es {
			t := c.parts[b.parts[i]]
			t.pending = append(t.pending, b.offs[i])
		}
		c.mu.Unlock()
		for i := range b.es {
			read++
			if !yield(b.es[i], nil) {
				return
			}
		}
		// The caller took copies of the entries: the slice goes back
		// cleared, so it holds no payload past the three polls in
		// memory.
		clear(b.es)
		batches.Put(b)
	}
	if ctx.Err() == nil && complete {
		c.note("kafka topic %s: read %d of %d records", c.topic, read, held)
	}
}

// poll fetches until every partition in want reached its end and sends
// each poll's entries to out. It reports whether the read is complete.
func (c *Conn) poll(ctx context.Context, cl *kgo.Client, want map[int32]int64, held int64, out chan<- *batch) bool {
	send := func(b *batch) bool {
		select {
		case out <- b:
			return true
		case <-ctx.Done():
			return false
		}
	}
	read := 0
	for len(want) > 0 {
		pctx, cancel := context.WithTimeout(ctx, c.wait)
		fetches := cl.PollRecords(pctx, pollMax)
		cancel()
		if ctx.Err() != nil {
			return false
		}
		var fetchErr error
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && fetchErr == nil {
				fetchErr = err
			}
		})
		if fetchErr != nil {
			send(&batch{err: fetchErr})
			return false
		}
		var recs []*kgo.Record
		for _, r := range fetches.Records() {
			end, open := want[r.Partition]
			if !open || r.Offset >= end {
				r.Recycle()
				continue // past what the read began with: the next run's
			}
			recs = append(recs, r)
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		}
		// Transaction markers and compacted-away offsets are never
		// returned: a partition whose next fetch position reached
		// its end is done.
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if end, ok := want[p.Partition]; ok && p.HighWatermark >= end && len(p.Records) == 0 && p.LastStableOffset >= end {
				delete(want, p.Partition)
			}
		})
		if len(recs) > 0 {
			b := c.entriesOf(recs) // recycles recs
			read += len(recs)
			if !send(b) {
				return false
			}
		}
		if len(recs) == 0 && fetches.Empty() {
			c.note("kafka topic %s: read %d of %d records: none came for %s (compacted or aborted records, or the topic was truncated)", c.topic, read, held, c.wait)
			return false
		}
	}
	return true
}

// pollMax bounds one poll's records: a read holds at most three polls of
// records and their entries (a fetch of 50 partitions can bring 50 MB).
const pollMax = 1024

// convertChunk is how many records a converting goroutine takes at a
// time (and the fewest worth a goroutine of their own).
const convertChunk = 64

// entriesOf converts a poll's records, spread over the CPUs, into a
// batch and hands each record back to fetchPool.
func (c *Conn) entriesOf(recs []*kgo.Record) *batch {
	b := batches.Get().(*batch)
	n := len(recs)
	b.es, b.parts, b.offs = grow(b.es, n), grow(b.parts, n), grow(b.offs, n)
	// The poller converts chunks itself and helpers take chunks as they
	// get a CPU: on a busy machine a helper that is not run soon takes
	// none, where a fixed half each made the poll wait for the slowest
	// goroutine to be scheduled.
	chunks := (len(recs) + convertChunk - 1) / convertChunk
	var next atomic.Int64
	work := func() {
		cv := converters.Get().(*converter)
		defer converters.Put(cv)
		for {
			k := int(next.Add(1)) - 1
			if k >= chunks {
				return
			}
			for i := k * convertChunk; i < min((k+1)*convertChunk, len(recs)); i++ {
				r := recs[i]
				b.es[i], b.parts[i], b.offs[i] = c.entryOf(r, cv), r.Partition, r.Offset
				r.Recycle()
			}
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), chunks) - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
	return b
}

// grow returns s with length n, on its own array when that is big
// enough: the conversion writes every element (the consumer cleared the
// entries, so a slice reused holds no payload of an earlier poll).
func grow[S ~[]E, E any](s S, n int) S {
	if cap(s) < n {
		return make(S, n)
	}
	return s[:n]
}

// commitEvery is how many stored records make a commit before the read
// has caught up (a commit is one round trip).
const commitEvery = 256

// Stored marks the entry's record stored and commits the group's offset
// past every record stored without a gap. A failed commit is noted: the
// records after the last commit are read again by the next run.
func (c *Conn) Stored(ctx context.Context, e *entry.Entry) {
	if err := c.markStored(ctx, e); err != nil {
		c.note("%s", err)
	}
}

func (c *Conn) markStored(ctx context.Context, e *entry.Entry) error {
	topic, p, off, ok := parseID(e.ID)
	if e.Source != Kind || !ok || topic != c.topic {
		return nil
	}
	c.mu.Lock()
	t := c.parts[p]
	if t == nil {
		c.mu.Unlock()
		return nil
	}
	t.stored[off] = true
	for len(t.pending) > 0 && t.stored[t.pending[0]] {
		t.next = t.pending[0] + 1
		delete(t.stored, t.pending[0])
		t.pending = t.pending[1:]
	}
	next := t.next
	commit := next > t.committed && (len(t.pending) == 0 || next-t.committed >= commitEvery)
	c.mu.Unlock()
	if !commit {
		return nil
	}
	return c.commit(ctx, p, next)
}

// Flush commits every partition's offset past its stored records: the
// runner calls it when a run ends.
func (c *Conn) Flush(ctx context.Context) error { return c.flush(ctx) }

// flush commits every partition's offset past its stored records.
func (c *Conn) flush(ctx context.Context) error {
	c.mu.Lock()
	due := map[int32]int64{}
	for p, t := range c.parts {
		if t.next > t.committed {
			due[p] = t.next
		}
	}
	c.mu.Unlock()
	var first error
	for p, next := range due {
		if err := c.commit(ctx, p, next); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (c *Conn) commit(ctx context.Context, p int32, next int64) error {
	adm, err := c.adminClient()
	if err != nil {
		return err
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: c.topic, Partition: p, At: next, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(context.WithoutCancel(ctx), c.group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("kafka: commit %s/%d at %d for group %s: %w (the records after the last commit are read again)", c.topic, p, next, c.group, c.redact(err))
	}
	c.mu.Lock()
	if t := c.parts[p]; t != nil && next > t.committed {
		t.committed = next
	}
	c.mu.Unlock()
	return nil
}

// Settle has nothing to do: a topic keeps its records until retention, and
// the group's offset moved past the record when its entry was stored.
func (c *Conn) Settle(context.Context, *entry.Entry, connector.Settlement) error { return nil }

// NothingToSettle: the runner has nothing to tell a topic.
func (c *Conn) NothingToSettle() {}

// ProbeEntry cannot tell without scanning the original topic.
func (c *Conn) ProbeEntry(context.Context, *entry.Entry) (connector.ProbeResult, string) {
	return connector.ProbeInconclusive, "kafka: finding a replayed record means scanning the original topic"
}

// Ref names the record.
func (c *Conn) Ref(e *entry.Entry) connector.Link {
	return connector.Link{Name: "record " + e.ID}
}

// Codes lists the reason codes the connector writes.
func (c *Conn) Codes() []connector.Code {
	return brokermsg.ExceptionCodes("Spring Kafka kafka_dlt-exception-fqcn/-cause-fqcn/-message/-stacktrace, Kafka Connect __connect.errors.exception.*")
}

func parseID(id string) (topic string, p int32, off int64, ok bool) {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return "", 0, 0, false
	}
	j := strings.LastIndexByte(id[:i], '/')
	if j < 0 {
		return "", 0, 0, false
	}
	pn, err1 := strconv.ParseInt(id[j+1:i], 10, 32)
	on, err2 := strconv.ParseInt(id[i+1:], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, 0, false
	}
	return id[:j], int32(pn), on, true
}

// header is one record header in the payload envelope.
type header struct {
	Key   string        `json:"key"`
	Value brokermsg.Bin `json:"value"`
}

// envelope is an entry's payload: the record as the DLT held it.
type envelope struct {
	brokermsg.Body
	Key               brokermsg.Bin `json:"key"`
	Headers           []header      `json:"headers,omitempty"`
	Topic             string        `json:"topic"`
	Partition         int32         `json:"partition"`
	Offset            int64         `json:"offset"`
	Timestamp         time.Time     `json:"timestamp"`
	OriginalTopic     string        `json:"original_topic,omitempty"`
	OriginalPartition *int32        `json:"original_partition,omitempty"`
	OriginalOffset    *int64        `json:"original_offset,omitempty"`
}

// number reads a Spring binary header (big-endian, size bytes) or a
// decimal string (Kafka Connect, other clients). Four ASCII digits are a
// string: as a binary int they would be a partition past 800 million.
// It allocates nothing: a read calls it twice a record.
func number(b []byte, size int) (int64, bool) {
	if n, ok := decimal(bytes.TrimSpace(b)); ok {
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

// decimal parses s as strconv.ParseInt(s, 10, 64) does, without the
// error value ParseInt allocates for what is not a number.
func decimal(s []byte) (int64, bool) {
	digits := s
	if len(digits) > 0 && (digits[0] == '+' || digits[0] == '-') {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) > 18 { // past 18 digits it may overflow: ParseInt decides
		v, err := strconv.ParseInt(string(s), 10, 64)
		return v, err == nil
	}
	if s[0] == '-' {
		n = -n
	}
	return n, true
}

const maxMessage = 2000

func firstNonEmpty(vs ...[]byte) []byte {
	for _, v := range vs {
		if len(v) > 0 {
			return v
		}
	}
	return nil
}

// recHeaders are the values of the headers entryOf reads, each the value
// of the record's last header of that name (as headerValue, in the plain
// converter the tests keep, finds it), taken in one pass over the
// headers: a scan of them for each of a dozen names was a twentieth of a
// record's conversion.
type recHeaders struct {
	dltTopic, dltPart, dltOff, connTopic, connPart, connOff        []byte
	binderTopic, binderPart, binderOff                             []byte
	fqcn, cause, connClass, dltMsg, connMsg, dltStack, connStack   []byte
	binderFQCN, binderMsg, binderStack, keyFQCN, keyMsg, keyStack  []byte
	retryTopic, retryPart, retryOff, retryFQCN, retryCause         []byte
	retryMsg, retryStack, retryKeyFQCN, retryKeyMsg, retryKeyStack []byte
	errMsg                                                         []byte // the spec's error_header
	key, count, lineage                                            []byte
	replayed                                                       bool // a HeaderCount header is there, empty or not
}

// read takes the headers of r; errHdr is the spec's error_header ("" for
// none).
func (h *recHeaders) read(r *kgo.Record, errHdr string) {
	for i := range r.Headers {
		v := r.Headers[i].Value
		if errHdr != "" && r.Headers[i].Key == errHdr {
			h.errMsg = v
		}
		switch r.Headers[i].Key {
		case dltTopic:
			h.dltTopic = v
		case dltPartition:
			h.dltPart = v
		case dltOffset:
			h.dltOff = v
		case connTopic:
			h.connTopic = v
		case connPartition:
			h.connPart = v
		case connOffset:
			h.connOff = v
		case dltFQCN:
			h.fqcn = v
		case dltCauseFQCN:
			h.cause = v
		case connClass:
			h.connClass = v
		case dltMessage:
			h.dltMsg = v
		case connMessage:
			h.connMsg = v
		case dltStack:
			h.dltStack = v
		case connStacktrace:
			h.connStack = v
		case binderTopic:
			h.binderTopic = v
		case binderPartition:
			h.binderPart = v
		case binderOffset:
			h.binderOff = v
		case binderFQCN:
			h.binderFQCN = v
		case binderMessage:
			h.binderMsg = v
		case binderStack:
			h.binderStack = v
		case dltKeyFQCN:
			h.keyFQCN = v
		case dltKeyMessage:
			h.keyMsg = v
		case dltKeyStack:
			h.keyStack = v
		case retryTopic:
			h.retryTopic = v
		case retryPartition:
			h.retryPart = v
		case retryOffset:
			h.retryOff = v
		case retryFQCN:
			h.retryFQCN = v
		case retryCauseFQCN:
			h.retryCause = v
		case retryMessage:
			h.retryMsg = v
		case retryStack:
			h.retryStack = v
		case retryKeyFQCN:
			h.retryKeyFQCN = v
		case retryKeyMsg:
			h.retryKeyMsg = v
		case retryKeyStack:
			h.retryKeyStack = v
		case brokermsg.HeaderKey:
			h.key = v
		case brokermsg.HeaderCount:
			h.count, h.replayed = v, true
		case brokermsg.HeaderLineage:
			h.lineage = v
		}
	}
}

// converter is one goroutine's state while it converts records: its last
// classification and the block it writes envelopes in.
type converter struct {
	memo  classMemo
	block []byte // the unused rest of the current block (length 0)
	// The last timestamp and its JSON: a DLT's records come in bursts,
	// many in the same millisecond, and formatting one was a tenth of
	// an envelope's time after the body.
	ts     time.Time
	tsJSON []byte
}

// appendTime appends t as brokermsg.AppendTime does.
func (cv *converter) appendTime(dst []byte, t time.Time) []byte {
	if cv == nil {
		return brokermsg.AppendTime(dst, t)
	}
	if cv.tsJSON == nil || !t.Equal(cv.ts) {
		cv.ts, cv.tsJSON = t, brokermsg.AppendTime(cv.tsJSON[:0], t)
	}
	return append(dst, cv.tsJSON...)
}

// converters keeps converters between polls and reads: a converter's
// block goes on where its last records left it. A converter of its own
// for each goroutine of each poll left up to a block's tail unused, a
// tenth of the payload bytes a read allocated.
var converters = sync.Pool{New: func() any { return new(converter) }}

// payloadBlock is the size of the blocks a converter writes envelopes
// in: one allocation for a block of envelopes where a malloc for every
// record (zeroed, and up to a size class past its length) was a fifth
// of a record's conversion. An entry's payload holds its block; the
// block goes once the entries written in it are all gone.
const payloadBlock = 256 << 10

// payload is r's envelope, written in the converter's block when it fits
// (a big record, or one whose escapes outgrow the estimate, gets its own
// allocation). The payload's capacity ends where it does: an append to it
// copies and never writes over the next entry's.
func (cv *converter) payload(r *kgo.Record, orig string, part *int32, off *int64) []byte {
	size := envelopeSize(r, orig)
	if size > payloadBlock/8 {
		return cv.appendEnvelope(nil, r, orig, part, off)
	}
	if cap(cv.block) < size {
		cv.block = make([]byte, 0, payloadBlock)
	}
	out := cv.appendEnvelope(cv.block, r, orig, part, off)
	if len(out) > cap(cv.block) {
		return out // outgrew the block: append moved it
	}
	cv.block = out[len(out):len(out):cap(out)]
	return out[:len(out):len(out)]
}

// classMemo is one converter's last classification. A DLT's records come
// in bursts of one failure with the same exception headers, and matching
// a stack's class names against every rule was a sixth of a record's
// conversion; comparing the headers with the last record's is a memcmp,
// and the entries of a burst share the memo's message string.
type classMemo struct {
	fqcn, cause, connClass, msg, stack string
	code, message                      string
	set                                bool
}

// classify returns the reason code and the entry's message for these
// exception headers.
func (m *classMemo) classify(fqcn, cause, connCl, msg, stack []byte) (code, message string) {
	if m.set && string(fqcn) == m.fqcn && string(cause) == m.cause && string(connCl) == m.connClass &&
		string(msg) == m.msg && string(stack) == m.stack {
		return m.code, m.message
	}
	*m = classMemo{fqcn: string(fqcn), cause: string(cause), connClass: string(connCl), msg: string(msg), stack: string(stack), set: true}
	m.code = brokermsg.ExceptionCode([]string{m.fqcn, m.cause, m.connClass}, m.msg, m.stack)
	message = m.msg
	if message == "" {
		// The class names something: "ClassName" alone is the error.
		for _, cl := range []string{m.cause, m.fqcn, m.connClass} {
			if cl != "" {
				message = cl
				break
			}
		}
	}
	m.message = brokermsg.Excerpt(message, maxMessage)
	return m.code, m.message
}

// entryOf converts one record. A read converts every record it takes, so
// the entry's short strings (id, derived key, original topic, labels) are
// built in one buffer on the stack and become substrings of one string:
// one allocation where a string each took eight.
func (c *Conn) entryOf(r *kgo.Record, cv *converter) entry.Entry {
	var scratch [256]byte
	b := append(scratch[:0], Kind...)
	b = append(b, 0)
	base := len(b) // b[:base] is DeriveKey's "kind\x00" before the id
	type span struct{ lo, hi int }
	mark := func(lo int) span { return span{lo - base, len(b) - base} }

	lo := len(b)
	b = append(b, r.Topic...)
	b = strconv.AppendInt(append(b, '/'), int64(r.Partition), 10)
	b = strconv.AppendInt(append(b, '/'), r.Offset, 10)
	id := mark(lo)

	var h recHeaders
	h.read(r, c.errHdr)
	origB, part, off := h.dltTopic, h.dltPart, h.dltOff
	if len(origB) == 0 {
		origB, part, off = h.retryTopic, h.retryPart, h.retryOff
	}
	if len(origB) == 0 {
		origB, part, off = h.connTopic, h.connPart, h.connOff
	}
	if len(origB) == 0 {
		origB, part, off = h.binderTopic, h.binderPart, h.binderOff
	}
	lo = len(b)
	b = append(b, origB...)
	origSpan := mark(lo)
	origSuffix := ""
	if len(origB) == 0 {
		// Spring's default DLT name is TOPIC.DLT (TOPIC-dlt for retry topics).
		for _, suf := range []string{".DLT", "-dlt", ".dlt", "-DLT"} {
			if t, ok := strings.CutSuffix(r.Topic, suf); ok && t != "" {
				origSuffix = t
				break
			}
		}
	}
	origSet := len(origB) > 0 || origSuffix != ""

	var partSpan, offSpan span
	origPart, partOK := number(part, 4)
	if partOK {
		lo = len(b)
		b = strconv.AppendInt(b, int64(int32(origPart)), 10)
		partSpan = mark(lo)
	}
	origOff, offOK := number(off, 8)
	if offOK {
		lo = len(b)
		b = strconv.AppendInt(b, origOff, 10)
		offSpan = mark(lo)
	}
	// The sequence whose order replays keep (replay/order.go): the
	// original partition, else the DLT partition, whose offsets are the
	// order the records failed in.
	lo = len(b)
	b = append(append(b, Kind...), ':')
	if origSet && partOK {
		if len(origB) > 0 {
			b = append(b, origB...)
		} else {
			b = append(b, origSuffix...)
		}
		b = strconv.AppendInt(append(b, '/'), int64(int32(origPart)), 10)
	} else {
		b = strconv.AppendInt(append(append(b, r.Topic...), '/'), int64(r.Partition), 10)
	}
	order := mark(lo)
	posSpan := offSpan
	if !offOK || !partOK {
		lo = len(b)
		b = strconv.AppendInt(b, r.Offset, 10)
		posSpan = mark(lo)
	}

	// The key: the application's own (kept) unless the record is a
	// replay of replayctl's (then its key names the ancestor), else
	// derived as entry.DeriveKey does: sha256 of "kind\x00id"
	// (TestEntryOfMatchesPlain compares with entry.DeriveKey).
	appKey := h.key
	replayed := h.replayed
	var keySpan span
	derived := replayed || len(appKey) == 0
	if derived {
		sum := sha256.Sum256(b[:base+id.hi])
		lo = len(b)
		b = append(b, "replayctl:"...)
		b = hex.AppendEncode(b, sum[:16])
		keySpan = mark(lo)
	}

	s := string(b[base:])
	str := func(sp span) string { return s[sp.lo:sp.hi] }
	e := entry.Entry{
		ID:           str(id),
		Source:       Kind,
		Origin:       c.origin,
		Attempts:     1,
		FirstFailure: r.Timestamp.UTC(),
		LastFailure:  r.Timestamp.UTC(),
	}
	labels := make(map[string]string, 6)
	labels["kafka.dlt"] = r.Topic
	if partOK {
		labels["kafka.original_partition"] = str(partSpan)
	}
	if offOK {
		labels["kafka.original_offset"] = str(offSpan)
	}
	switch {
	case len(origB) > 0:
		e.Topic = str(origSpan)
	case origSuffix != "":
		e.Topic = origSuffix
	}
	if e.Topic != "" {
		labels["kafka.original_topic"] = e.Topic
	}
	labels[entry.OrderLabel] = str(order)
	labels[entry.OrderPosLabel] = str(posSpan)

	// The value's error (Spring Kafka's DLT names, its retry topics',
	// Kafka Connect's, the binder's), else the key's; a header the spec
	// names (error_header) when none of them says anything.
	fqcn := firstNonEmpty(h.fqcn, h.retryFQCN, h.binderFQCN, h.keyFQCN, h.retryKeyFQCN)
	cause := firstNonEmpty(h.cause, h.retryCause)
	msg := firstNonEmpty(h.dltMsg, h.retryMsg, h.connMsg, h.binderMsg, h.keyMsg, h.retryKeyMsg, h.errMsg)
	stack := firstNonEmpty(h.dltStack, h.retryStack, h.connStack, h.binderStack, h.keyStack, h.retryKeyStack)
	e.ReasonCode, e.Message = cv.memo.classify(fqcn, cause, h.connClass, msg, stack)
	if replayed {
		labels = brokermsg.SetLineage(labels, string(appKey), string(h.count))
	} else if !derived {
		e.IdempotencyKey = string(appKey) // the application's own key, preserved
	}
	brokermsg.ReadLineage(&e, string(h.lineage))
	e.Labels = labels
	if derived {
		e.IdempotencyKey, e.KeyDerived = str(keySpan), true
	}
	var origPartP *int32
	var origOffP *int64
	if partOK {
		p := int32(origPart)
		origPartP = &p
	}
	if offOK {
		origOffP = &origOff
	}
	e.Payload = cv.payload(r, e.Topic, origPartP, origOffP)
	return e
}

// envelopeSize is about the length of r's envelope: its bytes, the
// JSON around them and an eighth for escapes.
func envelopeSize(r *kgo.Record, orig string) int {
	size := len(r.Value) + len(r.Key) + len(r.Topic) + len(orig) + 160
	for _, h := range r.Headers {
		size += len(h.Key) + len(h.Value) + 32
	}
	return size + size/8
}

// appendEnvelope appends the record's envelope as JSON: what
// json.Marshal(envelope{...}) writes, without its reflection and copies.
func appendEnvelope(dst []byte, r *kgo.Record, orig string, part *int32, off *int64) []byte {
	return (*converter)(nil).appendEnvelope(dst, r, orig, part, off)
}

// appendEnvelope is appendEnvelope with the converter's last timestamp.
func (cv *converter) appendEnvelope(dst []byte, r *kgo.Record, orig string, part *int32, off *int64) []byte {
	if size := envelopeSize(r, orig); cap(dst)-len(dst) < size {
		dst = append(make([]byte, 0, len(dst)+size), dst...)
	}
	dst = append(dst, '{')
	dst = brokermsg.AppendBody(dst, r.Value) // a null value is "body":"", as NewBody(nil)
	dst = brokermsg.AppendBin(brokermsg.AppendKey(dst, "key"), r.Key)
	if len(r.Headers) > 0 {
		dst = append(brokermsg.AppendKey(dst, "headers"), '[')
		for i, h := range r.Headers {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = brokermsg.AppendString(append(dst, `{"key":`...), h.Key)
			dst = brokermsg.AppendBin(append(dst, `,"value":`...), h.Value)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = brokermsg.AppendString(brokermsg.AppendKey(dst, "topic"), r.Topic)
	dst = brokermsg.AppendInt(brokermsg.AppendKey(dst, "partition"), int64(r.Partition))
	dst = brokermsg.AppendInt(brokermsg.AppendKey(dst, "offset"), r.Offset)
	dst = cv.appendTime(brokermsg.AppendKey(dst, "timestamp"), r.Timestamp.UTC())
	if orig != "" {
		dst = brokermsg.AppendString(brokermsg.AppendKey(dst, "original_topic"), orig)
	}
	if part != nil {
		dst = brokermsg.AppendInt(brokermsg.AppendKey(dst, "original_partition"), int64(*part))
	}
	if off != nil {
		dst = brokermsg.AppendInt(brokermsg.AppendKey(dst, "original_offset"), *off)
	}
	return append(dst, '}')
}
