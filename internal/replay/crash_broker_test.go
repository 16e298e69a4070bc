package replay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/connector/sqs/sqstest"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// The broker crash child's environment (issue 28).
const (
	brokerChildEnv = "REPLAYCTL_BROKER_CRASH_CHILD" // the --source spec
	brokerDBEnv    = "REPLAYCTL_BROKER_CRASH_DB"
)

// TestBrokerCrashChild is one reconcile process of
// TestBrokerReconcileSurvivesSIGKILL: the broker's source, replays through
// the connector itself (back to the work queue or topic).
func TestBrokerCrashChild(t *testing.T) {
	spec := os.Getenv(brokerChildEnv)
	if spec == "" {
		t.Skip("reconcile process of TestBrokerReconcileSurvivesSIGKILL")
	}
	ctx := context.Background()
	eng, _, err := policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(os.Getenv(brokerDBEnv), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	src, err := source.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	conn := src.(interface {
		Replay(context.Context, replay.Request) replay.Result
	})
	target := &announcingDispatcher{next: dispatchFunc(conn.Replay)}
	r := &replay.Reconciler{Engine: eng, Store: st, MaxParallel: 4, Actor: "crash-child",
		Router: replay.NewRulesRouter(eng.Rules, &replay.Route{Name: "broker", Dispatcher: target})}
	fmt.Println(markReady)
	if _, err := r.Run(ctx, []source.Source{src}); err != nil {
		t.Fatal(err)
	}
}

type dispatchFunc func(context.Context, replay.Request) replay.Result

func (f dispatchFunc) Dispatch(ctx context.Context, r replay.Request) replay.Result { return f(ctx, r) }

// brokerFixture is one broker holding a work queue (or topic) and its DLQ.
type brokerFixture interface {
	spec() string
	childEnv() []string
	// deadLetter puts n messages in the DLQ: message i failed with a
	// timeout (transient), every 10th with access denied (governance).
	deadLetter(t *testing.T, n int)
	// delivered counts the replays on the work queue by Idempotency-Key.
	delivered(t *testing.T) map[string]int
	// between runs: what time does to a killed run's leftovers (SQS:
	// the visibility timeout of its receive ends).
	between()
}

func errText(i int) (msg, stack string) {
	if i%10 == 0 {
		return "Access is denied", "x.ListenerExecutionFailedException: x\nCaused by: org.springframework.security.access.AccessDeniedException: Access is denied\n"
	}
	return "Read timed out", "x.ListenerExecutionFailedException: x\nCaused by: java.net.SocketTimeoutException: Read timed out\n"
}

// TestBrokerReconcileSurvivesSIGKILL kills reconcile processes reading a
// RabbitMQ queue, a Kafka topic and an SQS queue at random moments (while
// reading, between a replay's publish and the DLQ ack or commit, between
// the store's commit and the ack), restarts them until one finishes, and
// proves: no dead letter is lost (every one is stored, every transient one
// replayed), no key reached the work queue twice unless its ledger says
// outcome_unknown, and a last run sends nothing.
func TestBrokerReconcileSurvivesSIGKILL(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T) brokerFixture
	}{
		{"rabbitmq", newRabbitFixture},
		{"kafka", newKafkaFixture},
		{"sqs", newSQSFixture},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 60
			fx := tc.make(t)
			fx.deadLetter(t, n)
			db := filepath.Join(t.TempDir(), "replayctl.db")
			rng := rand.New(rand.NewPCG(20261127, uint64(len(tc.name))))
			run := func() (*crashChild, error) {
				cmd := exec.Command(os.Args[0], "-test.run=^TestBrokerCrashChild$", "-test.count=1", "-test.v=false")
				cmd.Env = append(append(os.Environ(), brokerChildEnv+"="+fx.spec(), brokerDBEnv+"="+db), fx.childEnv()...)
				c := &crashChild{cmd: cmd, out: newChildOutput(), done: make(chan error, 1)}
				cmd.Stdout, cmd.Stderr = c.out, c.out
				if err := cmd.Start(); err != nil {
					return nil, err
				}
				go func() { c.done <- cmd.Wait() }()
				return c, nil
			}
			kills, midDispatch := 0, 0
			for attempt := 0; kills < 8 && attempt < 40; attempt++ {
				c, err := run()
				if err != nil {
					t.Fatal(err)
				}
				select {
				case <-c.out.ready:
				case err := <-c.done:
					t.Fatalf("child exited before it was ready: %v\n%s", err, c.out)
				}
				// Half the kills land while reading or storing (0-120ms
				// after the store opened), half just after a replay went
				// out: between its publish and the DLQ's ack or commit.
				if attempt%2 == 1 {
					select {
					case <-c.out.dispatch:
					case err := <-c.done:
						c.done <- err // read again below
					}
				}
				delay := time.Duration(rng.IntN(120)) * time.Millisecond
				if attempt%2 == 1 {
					delay = time.Duration(rng.IntN(3000)) * time.Microsecond
				}
				timer := time.NewTimer(delay)
				select {
				case err := <-c.done:
					timer.Stop()
					if err != nil && !killedBySIGKILL(err) {
						t.Fatalf("child failed on its own: %v\n%s", err, c.out)
					}
				case <-timer.C:
					dispatching := happened(c.out.dispatch)
					_ = c.cmd.Process.Signal(syscall.SIGKILL)
					if err := <-c.done; killedBySIGKILL(err) {
						kills++
						if dispatching {
							midDispatch++
						}
					} else if err != nil {
						t.Fatalf("child failed on its own: %v\n%s", err, c.out)
					}
				}
				fx.between()
			}
			// Two clean runs: the first finishes the work, the second must
			// send nothing.
			for i := range 2 {
				c, err := run()
				if err != nil {
					t.Fatal(err)
				}
				if err := <-c.done; err != nil {
					t.Fatalf("clean run %d: %v\n%s", i, err, c.out)
				}
				fx.between()
			}
			t.Logf("%d kills, %d of them after the first dispatch", kills, midDispatch)

			st, err := bolt.Open(db, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			stored := map[string]*entry.Entry{}
			if err := st.Entries(context.Background(), func(er *store.EntryRecord) error {
				e := er.Entry
				stored[e.IdempotencyKey] = &e
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(stored) != n {
				t.Errorf("%d entries stored, want %d: dead letters lost or read twice under new keys", len(stored), n)
			}
			delivered := fx.delivered(t)
			transient := 0
			for key, e := range stored {
				var rec *idempotency.Record
				if err := st.View(context.Background(), func(tx store.Tx) error {
					var err error
					rec, err = tx.Ledger(key)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				if e.ReasonCode != brokermsg.CodeTimeout {
					if delivered[key] != 0 {
						t.Errorf("%s (%s) was replayed without approval", e.Ref(), e.ReasonCode)
					}
					continue
				}
				transient++
				unknown := rec != nil && rec.State == idempotency.OutcomeUnknown
				switch {
				case delivered[key] > 1 && !unknown:
					t.Errorf("%s: key delivered %d times, ledger %v", e.Ref(), delivered[key], rec)
				case delivered[key] == 0 && !unknown:
					t.Errorf("%s: transient entry never replayed (ledger %v)", e.Ref(), rec)
				}
			}
			if transient != n-n/10 {
				t.Errorf("%d transient entries, want %d", transient, n-n/10)
			}
			for key := range delivered {
				if stored[key] == nil {
					t.Errorf("a replay under key %s that no stored entry has", key)
				}
			}
		})
	}
}

// --- RabbitMQ ---

type rabbitFixture struct {
	url, work string
	ch        *amqp.Channel
}

func newRabbitFixture(t *testing.T) brokerFixture {
	u := testsvc.RabbitMQ(t)
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	f := &rabbitFixture{url: u, work: fmt.Sprintf("crash-%d", os.Getpid()), ch: ch}
	if _, err := ch.QueueDeclare(f.work+".dlq", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(f.work, false, false, false, false,
		amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": f.work + ".dlq"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ch.QueueDelete(f.work, false, false, false)
		_, _ = ch.QueueDelete(f.work+".dlq", false, false, false)
	})
	return f
}

func (f *rabbitFixture) spec() string {
	u, _ := url.Parse(f.url)
	return "rabbitmq:amqp://" + u.Host + "/?queue=" + f.work + ".dlq&wait=1s"
}

func (f *rabbitFixture) childEnv() []string {
	u, _ := url.Parse(f.url)
	p, _ := u.User.Password()
	return []string{"RABBITMQ_USERNAME=" + u.User.Username(), "RABBITMQ_PASSWORD=" + p}
}

func (f *rabbitFixture) deadLetter(t *testing.T, n int) {
	for i := range n {
		msg, stack := errText(i)
		if err := f.ch.PublishWithContext(context.Background(), "", f.work, false, false, amqp.Publishing{MessageId: "m" + strconv.Itoa(i),
			Body: []byte(`{"n":` + strconv.Itoa(i) + `}`), Headers: amqp.Table{"x-exception-message": msg, "x-exception-stacktrace": stack}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; {
		d, ok, err := f.ch.Get(f.work, false)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if err := d.Nack(false, false); err != nil {
				t.Fatal(err)
			}
			i++
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		q, err := f.ch.QueueDeclarePassive(f.work+".dlq", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if q.Messages == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("DLQ holds %d, want %d", q.Messages, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *rabbitFixture) delivered(t *testing.T) map[string]int {
	out := map[string]int{}
	for {
		d, ok, err := f.ch.Get(f.work, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		k, _ := d.Headers[brokermsg.HeaderKey].(string)
		out[k]++
	}
}

func (f *rabbitFixture) between() {}

// --- Kafka ---

type kafkaFixture struct {
	addrs []string
	cl    *kgo.Client
}

func newKafkaFixture(t *testing.T) brokerFixture {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders.DLT"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &kafkaFixture{addrs: c.ListenAddrs(), cl: cl}
}

func (f *kafkaFixture) spec() string {
	return "kafka:" + f.addrs[0] + "?topic=orders.DLT&group=replayctl&wait=1s"
}

func (f *kafkaFixture) childEnv() []string { return nil }

func (f *kafkaFixture) deadLetter(t *testing.T, n int) {
	for i := range n {
		msg, stack := errText(i)
		if err := f.cl.ProduceSync(context.Background(), &kgo.Record{Topic: "orders.DLT", Key: []byte("k" + strconv.Itoa(i)),
			Value: []byte(`{"n":` + strconv.Itoa(i) + `}`), Headers: []kgo.RecordHeader{
				{Key: "kafka_dlt-original-topic", Value: []byte("orders")},
				{Key: "kafka_dlt-exception-message", Value: []byte(msg)},
				{Key: "kafka_dlt-exception-stacktrace", Value: []byte(stack)}}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *kafkaFixture) delivered(t *testing.T) map[string]int {
	ends, err := kadm.NewClient(f.cl).ListEndOffsets(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	end := ends["orders"][0].Offset
	out := map[string]int{}
	if end == 0 {
		return out
	}
	c, err := kgo.NewClient(kgo.SeedBrokers(f.addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for read := int64(0); read < end; {
		if time.Now().After(deadline) {
			t.Fatalf("read %d of %d replayed records", read, end)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		for _, r := range c.PollFetches(ctx).Records() {
			read++
			for _, h := range r.Headers {
				if h.Key == brokermsg.HeaderKey {
					out[string(h.Value)]++
				}
			}
		}
		cancel()
	}
	return out
}

func (f *kafkaFixture) between() {}

// --- SQS ---

type sqsFixture struct {
	srv *sqstest.Server
	app *awssqs.Client
}

func newSQSFixture(t *testing.T) brokerFixture {
	f := &sqsFixture{srv: sqstest.New(t)}
	f.srv.CreateQueue("orders-dlq", "", 0)
	f.srv.CreateQueue("orders", "orders-dlq", 1)
	f.app = awssqs.New(awssqs.Options{Region: sqstest.Region, BaseEndpoint: aws.String(f.srv.URL), Credentials: aws.AnonymousCredentials{}})
	return f
}

func (f *sqsFixture) spec() string {
	return "sqs:" + f.srv.URLOf("orders-dlq") + "?wait=0s&visibility=60s"
}

func (f *sqsFixture) childEnv() []string {
	return []string{"AWS_ACCESS_KEY_ID=AKIDCRASH", "AWS_SECRET_ACCESS_KEY=crash", "AWS_REGION=" + sqstest.Region,
		"AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent"}
}

func (f *sqsFixture) deadLetter(t *testing.T, n int) {
	ctx := context.Background()
	for i := range n {
		msg, stack := errText(i)
		if _, err := f.app.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(f.srv.URLOf("orders")),
			MessageBody: aws.String(`{"n":` + strconv.Itoa(i) + `}`), MessageAttributes: map[string]types.MessageAttributeValue{
				"x-exception-message":    {DataType: aws.String("String"), StringValue: aws.String(msg)},
				"x-exception-stacktrace": {DataType: aws.String("String"), StringValue: aws.String(stack)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for len(f.srv.Messages("orders")) > 0 {
		if _, err := f.app.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(f.srv.URLOf("orders")), MaxNumberOfMessages: 10}); err != nil {
			t.Fatal(err)
		}
		f.srv.ExpireVisibility("orders")
	}
}

func (f *sqsFixture) delivered(*testing.T) map[string]int {
	out := map[string]int{}
	for _, m := range f.srv.Messages("orders") {
		if a, ok := m.Attributes[brokermsg.HeaderKey]; ok && a.StringValue != nil {
			out[*a.StringValue]++
		}
	}
	return out
}

// between: a killed run's receive keeps its messages invisible for the
// visibility timeout; the next run comes after it.
func (f *sqsFixture) between() { f.srv.ExpireVisibility("orders-dlq") }
