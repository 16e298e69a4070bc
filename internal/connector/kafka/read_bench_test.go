package kafka

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// readBenchRecords is the bench's DLT (internal/benchmark/brokers.go):
// 2000 records of about 1 KB with Spring's original-topic and a short
// stack trace, on one partition.
const readBenchRecords = 2000

func readBenchCluster(b *testing.B) string {
	b.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders.DLT"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	stack := "x.ListenerExecutionFailedException: x\nCaused by: java.net.SocketTimeoutException: Read timed out\n"
	recs := make([]*kgo.Record, readBenchRecords)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "orders.DLT", Key: []byte("k" + strconv.Itoa(i)),
			Value:   []byte(fmt.Sprintf(`{"order":%d,"note":"%s"}`, i, strings.Repeat("x", 900))),
			Headers: []kgo.RecordHeader{{Key: dltTopic, Value: []byte("orders")}, {Key: dltStack, Value: []byte(stack)}}}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	return c.ListenAddrs()[0]
}

// cpuPerOp reports the process's CPU time (user and system, kfake's
// included) per iteration, from when it is called to when the func it
// returns is (deferred to the bench's end): on the shared 2-core machine
// wall time says little.
func cpuPerOp(b *testing.B) func() {
	b.Helper()
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	t0 := cpu()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64((cpu()-t0).Microseconds())/float64(b.N), "cpu-µs/op")
		}
	}
}

// BenchmarkRead is one whole read of the bench's DLT by the connector,
// each under a new group (so from the start), every entry built.
func BenchmarkRead(b *testing.B) {
	addr := readBenchCluster(b)
	ctx := context.Background()
	group := 0
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		group++
		conn, err := Open(fmt.Sprintf("kafka:%s?topic=orders.DLT&group=bench-%d", addr, group))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, err := range conn.Entries(ctx) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != readBenchRecords {
			b.Fatalf("read %d of %d", n, readBenchRecords)
		}
		b.StopTimer() // the bench does not time the close either
		conn.Close()
		b.StartTimer()
	}
}

// BenchmarkReadBare is the bench's baseline for BenchmarkRead: franz-go
// alone asks the same offsets, consumes to the ends and builds nothing.
func BenchmarkReadBare(b *testing.B) {
	addr := readBenchCluster(b)
	ctx := context.Background()
	group := 0
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		group++
		c, err := Open(fmt.Sprintf("kafka:%s?topic=orders.DLT&group=bare-%d", addr, group))
		if err != nil {
			b.Fatal(err)
		}
		o, err := c.readOpts() // the connector's client without fetchPool
		if err != nil {
			b.Fatal(err)
		}
		cl, err := kgo.NewClient(o...)
		if err != nil {
			b.Fatal(err)
		}
		starts, ends, committed, err := c.offsets(ctx, kadm.NewClient(cl))
		if err != nil {
			b.Fatal(err)
		}
		from, want := map[int32]kgo.Offset{}, map[int32]int64{}
		for p, lo := range starts[c.topic] {
			start := lo.Offset
			if o, ok := committed.Lookup(c.topic, p); ok && o.At >= start {
				start = o.At
			}
			if end := ends[c.topic][p].Offset; end > start {
				from[p], want[p] = kgo.NewOffset().At(start), end
			}
		}
		cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{c.topic: from})
		for len(want) > 0 {
			f := cl.PollFetches(ctx)
			if err := f.Err0(); err != nil {
				b.Fatal(err)
			}
			f.EachRecord(func(r *kgo.Record) {
				if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
					delete(want, r.Partition)
				}
			})
		}
		b.StopTimer()
		cl.Close()
		c.Close()
		b.StartTimer()
	}
}
