package replay_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

// Kafka replays of one original partition keep their order (issue 28):
// 50 records of 2 partitions of orders, dead-lettered by a Spring
// listener (the DLT partition is the original's, Spring's default), are
// replayed with --max-parallel 8; each partition of orders then holds the
// replays in the order it held the originals.
func TestKafkaReplaysKeepPartitionOrder(t *testing.T) {
	ctx := context.Background()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders", "orders.DLT"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	addrs := cluster.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var originals []*kgo.Record
	for i := range 50 {
		originals = append(originals, &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprint("customer-", i%7)), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, originals...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want := map[int32][]string{}
	var dead []*kgo.Record
	for _, r := range originals {
		want[r.Partition] = append(want[r.Partition], string(r.Value))
		p, o := make([]byte, 4), make([]byte, 8)
		binary.BigEndian.PutUint32(p, uint32(r.Partition))
		binary.BigEndian.PutUint64(o, uint64(r.Offset))
		dead = append(dead, &kgo.Record{Topic: "orders.DLT", Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: []kgo.RecordHeader{
			{Key: "kafka_dlt-original-topic", Value: []byte("orders")}, {Key: "kafka_dlt-original-partition", Value: p},
			{Key: "kafka_dlt-original-offset", Value: o}, {Key: "kafka_dlt-exception-fqcn", Value: []byte("java.net.SocketTimeoutException")}}})
	}
	if len(want) != 2 {
		t.Fatalf("the originals went to %d partitions, want 2", len(want))
	}
	dlt, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer dlt.Close()
	if err := dlt.ProduceSync(ctx, dead...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	eng, _, err := policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "s.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	src, err := source.Parse("kafka:" + addrs[0] + "?topic=orders.DLT&group=replayctl&wait=1s")
	if err != nil {
		t.Fatal(err)
	}
	router := replay.NewOriginRouter(replay.NewRulesRouter(eng.Rules, nil), false, replay.Credentials{}, src)
	r := &replay.Reconciler{Engine: eng, Store: st, MaxParallel: 8, Actor: "order", Router: router}
	rep, err := r.Run(ctx, []source.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replays.Succeeded != 50 {
		t.Fatalf("replays %+v, want 50 succeeded", rep.Replays)
	}

	got := map[int32][]string{}
	rd, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"orders": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for n := 0; n < 100; {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		f := rd.PollFetches(pctx)
		cancel()
		if err := f.Err0(); err != nil {
			t.Fatalf("read orders after %d records: %v", n, err)
		}
		for _, r := range f.Records() {
			n++
			if r.Offset >= int64(len(want[r.Partition])) { // past the originals: a replay
				got[r.Partition] = append(got[r.Partition], string(r.Value))
			}
		}
	}
	for p, vs := range want {
		if !slices.Equal(got[p], vs) {
			t.Errorf("partition %d: replays in the order %v, the originals %v", p, got[p], vs)
		}
	}
}
