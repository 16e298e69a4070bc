package benchmark

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/kafka"
	"github.com/replayctl/replayctl/internal/connector/rabbitmq"
	"github.com/replayctl/replayctl/internal/connector/sqs"
	"github.com/replayctl/replayctl/internal/connector/sqs/sqstest"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// brokers (issue 28) measures each broker connector's reads and replays
// against the broker's own client doing the same reads and publishes in
// the same run, alternately: Kafka on kfake, SQS on sqstest, RabbitMQ on
// the machine's rabbitmq-server (skipped, with a row saying so, when it
// is not installed).
func brokers(ctx context.Context, c *Config) ([]Row, error) {
	n := c.size(2000, 100)
	// Seven alternating pairs: a Kafka read of 2000 records takes a few ms,
	// and on a shared machine one pair in three was off by 5x.
	rounds := c.size(7, 1)
	var rows []Row
	for _, b := range []struct {
		name string
		fn   func(context.Context, *Config, int, int) ([]Row, error)
	}{{"kafka", benchKafka}, {"sqs", benchSQS}, {"rabbitmq", benchRabbit}} {
		c.progress("broker connectors: " + b.name)
		r, err := b.fn(ctx, c, n, rounds)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", b.name, err)
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

func brokerRows(name string, n int, readOurs, readBare, replayOurs, replayBare time.Duration) []Row {
	return []Row{
		{Measure: name + " DLQ read (messages/s)", Figure: rate(n, readOurs), Unit: "/s", Baseline: rate(n, readBare),
			Ratio: readBare.Seconds() / readOurs.Seconds(), Note: "of the bare client's reads", Target: ">= 0.7x"},
		{Measure: name + " replay, 8 parallel (messages/s)", Figure: rate(n, replayOurs), Unit: "/s", Baseline: rate(n, replayBare),
			Ratio: replayBare.Seconds() / replayOurs.Seconds(), Note: "of the bare client's publishes", Target: ">= 0.7x"},
	}
}

const benchStack = "x.ListenerExecutionFailedException: x\nCaused by: java.net.SocketTimeoutException: Read timed out\n"

func benchBody(i int) []byte {
	return []byte(fmt.Sprintf(`{"order":%d,"note":"%s"}`, i, strings.Repeat("x", 900)))
}

// readAll keeps the entries for the replay rows. Its slice is sized up
// front: growing it copied every entry again (a thousand-entry doubling
// moves 400 KB), a cost of this harness, not of the connector (the runner
// stores each entry and keeps none).
func readAll(ctx context.Context, src connector.Source, n int) ([]entry.Entry, error) {
	out := make([]entry.Entry, 0, n)
	for e, err := range src.Entries(ctx) {
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if len(out) != n {
		return nil, fmt.Errorf("read %d of %d", len(out), n)
	}
	return out, nil
}

func replayAll(ctx context.Context, c connector.Connector, es []entry.Entry) (time.Duration, error) {
	return parallel(8, len(es), func(i int) error {
		if res := c.Replay(ctx, connector.Request{Entry: &es[i], Key: es[i].IdempotencyKey, Attempt: 1}); res.Outcome != connector.Succeeded {
			return fmt.Errorf("replay: %v %s", res.Outcome, res.Detail)
		}
		return nil
	})
}

func benchKafka(ctx context.Context, c *Config, n, rounds int) ([]Row, error) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders.DLT"))
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	addrs := cluster.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "orders.DLT", Key: []byte("k" + strconv.Itoa(i)), Value: benchBody(i), Headers: []kgo.RecordHeader{
			{Key: "kafka_dlt-original-topic", Value: []byte("orders")}, {Key: "kafka_dlt-exception-stacktrace", Value: []byte(benchStack)}}}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, err
	}
	var es []entry.Entry
	group := 0
	ours := func() (time.Duration, error) {
		group++
		conn, err := kafka.Open(fmt.Sprintf("kafka:%s?topic=orders.DLT&group=bench-%d", addrs[0], group))
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		t0 := time.Now()
		es, err = readAll(ctx, conn, n)
		return time.Since(t0), err
	}
	// The bare read does the job the connector's does, with franz-go
	// alone: find where its group committed and where the topic starts
	// and ends (the three questions at once), consume from there and stop
	// at the ends (it is not told how many records there are), without
	// making entries. It used to consume from offset 0 until it had n
	// records: no offsets asked, no group, the count known up front.
	bare := func() (time.Duration, error) {
		group++
		t0 := time.Now()
		rc, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		if err != nil {
			return 0, err
		}
		defer rc.Close()
		want, err := bareOffsets(ctx, rc, "orders.DLT", fmt.Sprintf("bench-bare-%d", group))
		if err != nil {
			return 0, err
		}
		for len(want) > 0 {
			f := rc.PollFetches(ctx)
			if err := f.Err0(); err != nil {
				return 0, err
			}
			f.EachRecord(func(r *kgo.Record) {
				if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
					delete(want, r.Partition)
				}
			})
		}
		return time.Since(t0), nil
	}
	ro, rb, err := paired(rounds, ours, bare)
	if err != nil {
		return nil, err
	}
	conn, err := kafka.Open(fmt.Sprintf("kafka:%s?topic=orders.DLT&group=bench-replay", addrs[0]))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	po, pb, err := paired(rounds, func() (time.Duration, error) { return replayAll(ctx, conn, es) }, func() (time.Duration, error) {
		return parallel(8, n, func(i int) error {
			r := &kgo.Record{Topic: "orders", Key: recs[i].Key, Value: recs[i].Value, Headers: recs[i].Headers}
			return cl.ProduceSync(ctx, r).FirstErr()
		})
	})
	if err != nil {
		return nil, err
	}
	return brokerRows("Kafka (kfake)", n, ro, rb, po, pb), nil
}

// bareOffsets is a consumer's start with franz-go alone: the topic's
// start and end offsets and the group's committed offsets, asked at once;
// it consumes each partition from the group's offset (else the start)
// and returns the end offset each must reach.
func bareOffsets(ctx context.Context, cl *kgo.Client, topic, group string) (map[int32]int64, error) {
	adm := kadm.NewClient(cl)
	var starts, ends kadm.ListedOffsets
	var committed kadm.OffsetResponses
	var errs [3]error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if starts, errs[0] = adm.ListStartOffsets(ctx, topic); errs[0] == nil {
			errs[0] = starts.Error()
		}
	}()
	go func() {
		defer wg.Done()
		if ends, errs[1] = adm.ListEndOffsets(ctx, topic); errs[1] == nil {
			errs[1] = ends.Error()
		}
	}()
	if committed, errs[2] = adm.FetchOffsets(ctx, group); errs[2] == nil {
		errs[2] = committed.Error()
	}
	wg.Wait()
	if errors.Is(errs[2], kerr.GroupIDNotFound) {
		errs[2] = nil
	}
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	from, want := map[int32]kgo.Offset{}, map[int32]int64{}
	for p, lo := range starts[topic] {
		start := lo.Offset
		if o, ok := committed.Lookup(topic, p); ok && o.At >= start {
			start = o.At
		}
		if end := ends[topic][p].Offset; end > start {
			from[p], want[p] = kgo.NewOffset().At(start), end
		}
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: from})
	return want, nil
}

func benchSQS(ctx context.Context, c *Config, n, rounds int) ([]Row, error) {
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "AKIDBENCH", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": sqstest.Region} {
		if os.Getenv(k) == "" {
			os.Setenv(k, v) // sqstest does not check signatures; the SDK wants something to sign with
		}
	}
	srv := sqstest.New(cleanups{})
	defer srv.Close()
	srv.CreateQueue("orders-dlq", "", 0)
	srv.CreateQueue("orders", "orders-dlq", 1)
	app := awssqs.New(awssqs.Options{Region: sqstest.Region, BaseEndpoint: aws.String(srv.URL), Credentials: aws.AnonymousCredentials{}})
	attrs := map[string]types.MessageAttributeValue{"x-exception-stacktrace": {DataType: aws.String("String"), StringValue: aws.String(benchStack)}}
	for i := range n {
		if _, err := app.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(srv.URLOf("orders-dlq")),
			MessageBody: aws.String(string(benchBody(i))), MessageAttributes: attrs}); err != nil {
			return nil, err
		}
	}
	var es []entry.Entry
	var conn *sqs.Conn
	ours := func() (time.Duration, error) {
		srv.ExpireVisibility("orders-dlq")
		var err error
		if conn, err = sqs.Open("sqs:" + srv.URLOf("orders-dlq") + "?wait=0s&region=" + sqstest.Region); err != nil {
			return 0, err
		}
		t0 := time.Now()
		es, err = readAll(ctx, conn, n)
		return time.Since(t0), err
	}
	bare := func() (time.Duration, error) {
		srv.ExpireVisibility("orders-dlq")
		t0 := time.Now()
		for {
			out, err := app.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(srv.URLOf("orders-dlq")), MaxNumberOfMessages: 10,
				MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
			if err != nil {
				return 0, err
			}
			if len(out.Messages) == 0 {
				return time.Since(t0), nil
			}
		}
	}
	ro, rb, err := paired(rounds, ours, bare)
	if err != nil {
		return nil, err
	}
	// Replays go to the DLQ's source queue, orders (its redrive policy
	// names orders-dlq).
	for i := range es {
		es[i].Payload = []byte(strings.Replace(string(es[i].Payload), `"attributes":{`, `"attributes":{"DeadLetterQueueSourceArn":"`+sqstest.ARNOf("orders")+`",`, 1))
	}
	po, pb, err := paired(rounds, func() (time.Duration, error) { return replayAll(ctx, conn, es) }, func() (time.Duration, error) {
		return parallel(8, n, func(i int) error {
			_, err := app.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(srv.URLOf("orders")),
				MessageBody: aws.String(string(benchBody(i))), MessageAttributes: attrs})
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return brokerRows("SQS (sqstest)", n, ro, rb, po, pb), nil
}

// cleanups lets sqstest.New run outside a test: the caller closes it.
type cleanups struct{}

func (cleanups) Cleanup(func()) {}

func benchRabbit(ctx context.Context, c *Config, n, rounds int) ([]Row, error) {
	u, err := testsvc.RabbitMQURL()
	if err != nil {
		return []Row{{Measure: "RabbitMQ DLQ read and replay", Note: "skipped: " + err.Error()}}, nil
	}
	defer testsvc.Stop()
	conn, err := amqp.Dial(u)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	for _, q := range []string{"bench", "bench.dlq"} {
		if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
			return nil, err
		}
	}
	for i := range n {
		if err := ch.PublishWithContext(ctx, "", "bench.dlq", false, false, amqp.Publishing{MessageId: "m" + strconv.Itoa(i), Body: benchBody(i),
			Headers: amqp.Table{"x-exception-stacktrace": benchStack, "x-first-death-queue": "bench", "x-first-death-reason": "rejected"}}); err != nil {
			return nil, err
		}
	}
	waitFull := func() error {
		deadline := time.Now().Add(30 * time.Second)
		for {
			q, err := ch.QueueDeclarePassive("bench.dlq", false, false, false, false, nil)
			if err != nil || q.Messages == n {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("bench.dlq holds %d of %d", q.Messages, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	host := strings.TrimPrefix(u, "amqp://guest:guest@")
	// Neither side acks (the queue must stay full for the next round), so
	// the prefetch holds them all.
	prefetch := n + 1
	spec := fmt.Sprintf("rabbitmq:amqp://guest:guest@%s?queue=bench.dlq&prefetch=%d", host, prefetch)
	var es []entry.Entry
	ours := func() (time.Duration, error) {
		if err := waitFull(); err != nil {
			return 0, err
		}
		rc, err := rabbitmq.Open(spec)
		if err != nil {
			return 0, err
		}
		defer rc.Close() // unacked: back to the queue
		t0 := time.Now()
		es, err = readAll(ctx, rc, n)
		return time.Since(t0), err
	}
	bare := func() (time.Duration, error) {
		if err := waitFull(); err != nil {
			return 0, err
		}
		// Like the connector's read, the bare read connects first (it
		// used to borrow the setup's connection: the connector's row
		// then paid a dial the baseline did not).
		t0 := time.Now()
		rconn, err := amqp.Dial(u)
		if err != nil {
			return 0, err
		}
		defer rconn.Close() // unacked: back to the queue
		bc, err := rconn.Channel()
		if err != nil {
			return 0, err
		}
		if err := bc.Qos(prefetch, 0, false); err != nil {
			return 0, err
		}
		ds, err := bc.Consume("bench.dlq", "", false, false, false, false, nil)
		if err != nil {
			return 0, err
		}
		for range n {
			<-ds
		}
		return time.Since(t0), nil
	}
	ro, rb, err := paired(rounds, ours, bare)
	if err != nil {
		return nil, err
	}
	// Replays go to the queue named by x-first-death-queue: bench.
	pub, err := rabbitmq.Open(spec)
	if err != nil {
		return nil, err
	}
	defer pub.Close()
	confirmCh, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := confirmCh.Confirm(false); err != nil {
		return nil, err
	}
	po, pb, err := paired(rounds, func() (time.Duration, error) { return replayAll(ctx, pub, es) }, func() (time.Duration, error) {
		return parallel(8, n, func(i int) error {
			dc, err := confirmCh.PublishWithDeferredConfirmWithContext(ctx, "", "bench", true, false, amqp.Publishing{Body: benchBody(i),
				Headers: amqp.Table{"x-exception-stacktrace": benchStack}})
			if err != nil {
				return err
			}
			if ok, err := dc.WaitContext(ctx); err != nil || !ok {
				return fmt.Errorf("not confirmed: %v", err)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return brokerRows("RabbitMQ", n, ro, rb, po, pb), nil
}
