package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector/kafka"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// On a shared store the runner ingests in batches before anyone claims;
// a broker source hears "stored" once a batch commits (shared_ingest.go),
// so a Kafka group's offset moves past what PostgreSQL holds: a second
// run reads nothing again, and each record was replayed once.
func TestSharedIngestCommitsBrokerOffsets(t *testing.T) {
	ctx := context.Background()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders.DLT"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, k := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders.DLT", Key: []byte(k), Value: []byte(`{}`), Headers: []kgo.RecordHeader{
			{Key: "kafka_dlt-original-topic", Value: []byte("orders")},
			{Key: "kafka_dlt-exception-fqcn", Value: []byte("java.net.SocketTimeoutException")}}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	eng, _, err := policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := postgres.Open(ctx, testsvc.Postgres(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	spec := "kafka:" + cluster.ListenAddrs()[0] + "?topic=orders.DLT&group=replayctl&wait=1s"
	run := func() *replay.Report {
		src, err := source.Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		router := replay.NewOriginRouter(replay.NewRulesRouter(eng.Rules, nil), false, replay.Credentials{}, src)
		r := &replay.Reconciler{Engine: eng, Store: pg, MaxParallel: 2, Actor: "shared", Owner: "w1", Router: router}
		rep, err := r.Run(ctx, []source.Source{src})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := run(); rep.Ingested != 3 || rep.Replays.Succeeded != 3 {
		t.Fatalf("first run: ingested %d, replays %+v", rep.Ingested, rep.Replays)
	}
	again, err := kafka.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	n := 0
	for _, err := range again.Entries(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 0 {
		t.Errorf("the group's offset did not move past the stored records: %d read again", n)
	}
	if rep := run(); rep.Replays.Dispatched != 0 {
		t.Errorf("second run dispatched %d", rep.Replays.Dispatched)
	}
}
