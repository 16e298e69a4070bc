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
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// orderFixture is a kfake cluster whose orders.DLT holds the dead letters
// of 50 records of 2 partitions of orders, as a Spring listener writes
// them (the DLT partition is the original's, Spring's default).
type orderFixture struct {
	addrs []string
	want  map[int32][]string // per partition of orders, the originals' values in order
}

func newOrderFixture(t *testing.T) *orderFixture {
	t.Helper()
	ctx := context.Background()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders", "orders.DLT"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	f := &orderFixture{addrs: cluster.ListenAddrs(), want: map[int32][]string{}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addrs...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
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
	var dead []*kgo.Record
	for _, r := range originals {
		f.want[r.Partition] = append(f.want[r.Partition], string(r.Value))
		p, o := make([]byte, 4), make([]byte, 8)
		binary.BigEndian.PutUint32(p, uint32(r.Partition))
		binary.BigEndian.PutUint64(o, uint64(r.Offset))
		dead = append(dead, &kgo.Record{Topic: "orders.DLT", Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: []kgo.RecordHeader{
			{Key: "kafka_dlt-original-topic", Value: []byte("orders")}, {Key: "kafka_dlt-original-partition", Value: p},
			{Key: "kafka_dlt-original-offset", Value: o}, {Key: "kafka_dlt-exception-fqcn", Value: []byte("java.net.SocketTimeoutException")}}})
	}
	if len(f.want) != 2 {
		t.Fatalf("the originals went to %d partitions, want 2", len(f.want))
	}
	dlt, err := kgo.NewClient(kgo.SeedBrokers(f.addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer dlt.Close()
	if err := dlt.ProduceSync(ctx, dead...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *orderFixture) source(t *testing.T) source.Source {
	t.Helper()
	src, err := source.Parse("kafka:" + f.addrs[0] + "?topic=orders.DLT&group=replayctl&wait=1s")
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// check reads orders back: past the originals, each partition must hold
// the replays in the originals' order.
func (f *orderFixture) check(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	got := map[int32][]string{}
	rd, err := kgo.NewClient(kgo.SeedBrokers(f.addrs...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"orders": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for n := 0; n < 100; {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := rd.PollFetches(pctx)
		cancel()
		if err := fs.Err0(); err != nil {
			t.Fatalf("read orders after %d records: %v", n, err)
		}
		for _, r := range fs.Records() {
			n++
			if r.Offset >= int64(len(f.want[r.Partition])) { // past the originals: a replay
				got[r.Partition] = append(got[r.Partition], string(r.Value))
			}
		}
	}
	for p, vs := range f.want {
		if !slices.Equal(got[p], vs) {
			t.Errorf("partition %d: replays in the order %v, the originals %v", p, got[p], vs)
		}
	}
}

func loadEngine(t *testing.T) *triage.Engine {
	t.Helper()
	eng, _, err := policy.LoadEngine(context.Background(), "../../rules.yaml", "../../policies", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// Kafka replays of one original partition keep their order (issue 28):
// 50 records of 2 partitions of orders, dead-lettered by a Spring
// listener (the DLT partition is the original's, Spring's default), are
// replayed with --max-parallel 8; each partition of orders then holds the
// replays in the order it held the originals.
func TestKafkaReplaysKeepPartitionOrder(t *testing.T) {
	f := newOrderFixture(t)
	eng := loadEngine(t)
	st, err := bolt.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	src := f.source(t)
	router := replay.NewOriginRouter(replay.NewRulesRouter(eng.Rules, nil), false, replay.Credentials{}, src)
	r := &replay.Reconciler{Engine: eng, Store: st, MaxParallel: 8, Actor: "order", Router: router}
	rep, err := r.Run(context.Background(), []source.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replays.Succeeded != 50 {
		t.Fatalf("replays %+v, want 50 succeeded", rep.Replays)
	}
	f.check(t)
}

// downDispatch answers as a topic that cannot be reached: nothing sent.
type downDispatch struct{}

func (downDispatch) Dispatch(context.Context, replay.Request) replay.Result {
	return replay.Result{Outcome: replay.NotSent, TargetDown: true, Detail: "connection refused"}
}

// A bulk replay of stored entries keeps the order too: the 50 entries wait
// after a run whose target was down, then `dlq replay --filter` sends
// them with --max-parallel 8 (the selection is sorted by ref, where
// offset 10 comes before offset 9: each partition's records are put back
// in offset order, and go one at a time).
func TestKafkaBulkReplaysKeepPartitionOrder(t *testing.T) {
	f := newOrderFixture(t)
	eng := loadEngine(t)
	st, err := bolt.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	down := &replay.Route{Name: "down", Dispatcher: downDispatch{}}
	first := &replay.Reconciler{Engine: eng, Store: st, MaxParallel: 8, Actor: "order", Router: replay.NewRulesRouter(eng.Rules, down)}
	if rep, err := first.Run(ctx, []source.Source{f.source(t)}); err != nil || rep.Replays.Succeeded != 0 {
		t.Fatalf("first run: %+v, %v", rep, err)
	}
	router := replay.NewOriginRouter(replay.NewRulesRouter(eng.Rules, nil), false, replay.Credentials{})
	bk := &replay.Bulk{Reconciler: &replay.Reconciler{Engine: eng, Store: st, MaxParallel: 8, Actor: "order", Router: router}, Inventory: st}
	rep, err := bk.ExecuteReplay(ctx, replay.BulkFilter{Classes: []string{"transient"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replays[replay.Succeeded.String()] != 50 {
		t.Fatalf("bulk replays %+v, want 50 succeeded", rep.Replays)
	}
	f.check(t)
}
