package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector/sqs/sqstest"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// TestBrokerStories runs the stories of testdata/broker (issue 28), one
// per broker, against real brokers: the machine's rabbitmq-server,
// franz-go's kfake cluster and the hand-made SQS server (sqstest). The
// `broker` command plays the applications around replayctl: it sets up a
// work queue (or topic) and its DLQ, dead-letters messages with a
// Spring-style application error, counts what each holds, and fails
// replayed messages again.
func TestBrokerStories(t *testing.T) {
	env := &brokerEnv{amqp: testsvc.RabbitMQ(t)}
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	env.kafka = kc.ListenAddrs()
	env.sqs = sqstest.New(t)
	p := storyParams()
	p.Dir = "testdata/broker"
	setup := p.Setup
	p.Setup = func(e *testscript.Env) error {
		e.Values[brokerKey{}] = env
		return setup(e)
	}
	p.Cmds["broker"] = brokerCmd
	testscript.Run(t, p)
}

type brokerKey struct{}

type brokerEnv struct {
	amqp  string
	kafka []string
	sqs   *sqstest.Server
	seq   atomic.Int64
}

// failures are the application errors `broker KIND fail` dead-letters
// with: Spring's exception headers (attributes on SQS).
var failures = map[string][2]string{
	"timeout": {"Listener method threw exception", "org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: Listener method threw exception\nCaused by: java.net.SocketTimeoutException: Read timed out\n"},
	"denied":  {"Access is denied", "org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: x\nCaused by: org.springframework.security.access.AccessDeniedException: Access is denied\n"},
	"none":    {"", ""},
}

// brokerCmd: `broker KIND setup` (exports SRC, the --source spec),
// `broker KIND fail ID timeout|denied|none`, `broker KIND count work|dlq`,
// `broker KIND refail` (the application fails every replayed message
// again: back to the DLQ), `broker sqs expire` (the visibility timeout of
// the DLQ's received messages ends).
func brokerCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: broker rabbitmq|kafka|sqs setup|fail ID CLASS|count work|dlq|refail")
	}
	env := ts.Value(brokerKey{}).(*brokerEnv)
	var err error
	switch args[0] {
	case "rabbitmq":
		err = rabbitStep(ts, env, args[1:])
	case "kafka":
		err = kafkaStep(ts, env, args[1:])
	case "sqs":
		err = sqsStep(ts, env, args[1:])
	default:
		err = fmt.Errorf("unknown broker %q", args[0])
	}
	ts.Check(err)
}

func waitFor(what string, ok func() (bool, error)) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		done, err := ok()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func rabbitStep(ts *testscript.TestScript, env *brokerEnv, args []string) error {
	conn, err := amqp.Dial(env.amqp)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	work := ts.Getenv("BROKER_WORK")
	dlq := work + ".dlq"
	count := func(q string) (int, error) {
		c, err := conn.Channel()
		if err != nil {
			return 0, err
		}
		defer c.Close()
		qq, err := c.QueueDeclarePassive(q, false, false, false, false, nil)
		return qq.Messages, err
	}
	// reject takes one message from work and rejects it: the broker
	// dead-letters it to the DLQ with x-death reason rejected.
	reject := func() error {
		before, err := count(dlq)
		if err != nil {
			return err
		}
		var d amqp.Delivery
		if err := waitFor("a message on "+work, func() (bool, error) {
			var ok bool
			d, ok, err = ch.Get(work, false)
			return ok, err
		}); err != nil {
			return err
		}
		if err := d.Nack(false, false); err != nil {
			return err
		}
		return waitFor("the dead letter", func() (bool, error) { n, err := count(dlq); return n > before, err })
	}
	switch args[0] {
	case "setup":
		work = fmt.Sprintf("orders-%d-%d", os.Getpid(), env.seq.Add(1))
		ts.Setenv("BROKER_WORK", work)
		if _, err := ch.QueueDeclare(work+".dlq", false, false, false, false, nil); err != nil {
			return err
		}
		if _, err := ch.QueueDeclare(work, false, false, false, false,
			amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": work + ".dlq"}); err != nil {
			return err
		}
		u, _ := url.Parse(env.amqp)
		pass, _ := u.User.Password()
		ts.Setenv("RABBITMQ_USERNAME", u.User.Username())
		ts.Setenv("RABBITMQ_PASSWORD", pass)
		ts.Setenv("SRC", "rabbitmq:amqp://"+u.Host+"/?queue="+work+".dlq&wait=1s")
		return nil
	case "fail":
		f := failures[args[2]]
		h := amqp.Table{}
		if f[0] != "" {
			h["x-exception-message"], h["x-exception-stacktrace"] = f[0], f[1]
		}
		if err := ch.PublishWithContext(context.Background(), "", work, false, false,
			amqp.Publishing{MessageId: args[1], ContentType: "application/json", Headers: h, Body: []byte(`{"order":"` + args[1] + `"}`)}); err != nil {
			return err
		}
		return reject()
	case "count":
		q := work
		if args[1] == "dlq" {
			q = dlq
		}
		n, err := count(q)
		if err == nil {
			fmt.Fprintln(ts.Stdout(), n)
		}
		return err
	case "refail":
		n, err := count(work)
		for ; err == nil && n > 0; n-- {
			err = reject()
		}
		return err
	}
	return fmt.Errorf("unknown step %q", args[0])
}

func kafkaStep(ts *testscript.TestScript, env *brokerEnv, args []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.kafka...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	work := ts.Getenv("BROKER_WORK")
	dlt := work + ".DLT"
	end := func(topic string) (int64, error) {
		o, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return 0, err
		}
		return o[topic][0].Offset, o.Error()
	}
	springHeaders := func(class string, offset int64) []kgo.RecordHeader {
		f := failures[class]
		h := []kgo.RecordHeader{{Key: "kafka_dlt-original-topic", Value: []byte(work)},
			{Key: "kafka_dlt-original-partition", Value: []byte{0, 0, 0, 0}},
			{Key: "kafka_dlt-original-offset", Value: []byte(strconv.FormatInt(offset, 10))}}
		if f[0] != "" {
			h = append(h, kgo.RecordHeader{Key: "kafka_dlt-exception-message", Value: []byte(f[0])},
				kgo.RecordHeader{Key: "kafka_dlt-exception-stacktrace", Value: []byte(f[1])})
		}
		return h
	}
	switch args[0] {
	case "setup":
		work = fmt.Sprintf("orders-%d-%d", os.Getpid(), env.seq.Add(1))
		ts.Setenv("BROKER_WORK", work)
		if _, err := adm.CreateTopics(ctx, 1, 1, nil, work, work+".DLT"); err != nil {
			return err
		}
		ts.Setenv("SRC", "kafka:"+strings.Join(env.kafka, ",")+"?topic="+work+".DLT&group=replayctl&wait=1s")
		return nil
	case "fail":
		return cl.ProduceSync(ctx, &kgo.Record{Topic: dlt, Key: []byte(args[1]), Value: []byte(`{"order":"` + args[1] + `"}`),
			Headers: springHeaders(args[2], 0)}).FirstErr()
	case "count":
		t := work
		if args[1] == "dlq" {
			t = dlt
		}
		n, err := end(t)
		if err == nil {
			fmt.Fprintln(ts.Stdout(), n)
		}
		return err
	case "refail":
		// Every record replayed to the work topic since the last refail
		// fails again: Spring dead-letters it with its headers, ours
		// included.
		n, err := end(work)
		if err != nil {
			return err
		}
		from, _ := strconv.ParseInt(ts.Getenv("BROKER_REFAILED"), 10, 64)
		ts.Setenv("BROKER_REFAILED", strconv.FormatInt(n, 10))
		if n <= from {
			return nil
		}
		c, err := kgo.NewClient(kgo.SeedBrokers(env.kafka...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{work: {0: kgo.NewOffset().At(from)}}))
		if err != nil {
			return err
		}
		defer c.Close()
		var got []*kgo.Record
		err = waitFor("the replayed records", func() (bool, error) {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			got = append(got, c.PollFetches(pctx).Records()...)
			return int64(len(got)) >= n-from, nil
		})
		for _, r := range got {
			if err != nil {
				break
			}
			err = cl.ProduceSync(ctx, &kgo.Record{Topic: dlt, Key: r.Key, Value: r.Value,
				Headers: append(springHeaders("timeout", r.Offset), r.Headers...)}).FirstErr()
		}
		return err
	}
	return fmt.Errorf("unknown step %q", args[0])
}

func sqsStep(ts *testscript.TestScript, env *brokerEnv, args []string) error {
	srv := env.sqs
	work := ts.Getenv("BROKER_WORK")
	dlq := work + "-dlq"
	app := awssqs.New(awssqs.Options{Region: sqstest.Region, BaseEndpoint: aws.String(srv.URL), Credentials: aws.AnonymousCredentials{}})
	ctx := context.Background()
	// failAll is the consumer that never deletes: every message of the
	// work queue is received until the redrive policy moves it.
	failAll := func() error {
		for len(srv.Messages(work)) > 0 {
			if _, err := app.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(srv.URLOf(work)), MaxNumberOfMessages: 10}); err != nil {
				return err
			}
			srv.ExpireVisibility(work)
		}
		return nil
	}
	switch args[0] {
	case "setup":
		work = fmt.Sprintf("orders-%d", env.seq.Add(1))
		ts.Setenv("BROKER_WORK", work)
		srv.CreateQueue(work+"-dlq", "", 0)
		srv.CreateQueue(work, work+"-dlq", 1)
		ts.Setenv("AWS_ACCESS_KEY_ID", "AKIDSTORY")
		ts.Setenv("AWS_SECRET_ACCESS_KEY", "story-secret")
		ts.Setenv("AWS_REGION", sqstest.Region)
		ts.Setenv("AWS_CONFIG_FILE", "/nonexistent")
		ts.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
		ts.Setenv("SRC", "sqs:"+srv.URLOf(work+"-dlq")+"?wait=0s")
		return nil
	case "fail":
		f := failures[args[2]]
		attrs := map[string]types.MessageAttributeValue{}
		if f[0] != "" {
			attrs["x-exception-message"] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(f[0])}
			attrs["x-exception-stacktrace"] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(f[1])}
		}
		if _, err := app.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(srv.URLOf(work)),
			MessageBody: aws.String(`{"order":"` + args[1] + `"}`), MessageAttributes: attrs}); err != nil {
			return err
		}
		return failAll()
	case "count":
		q := work
		if args[1] == "dlq" {
			q = dlq
		}
		fmt.Fprintln(ts.Stdout(), len(srv.Messages(q)))
		return nil
	case "refail":
		return failAll()
	case "expire":
		srv.ExpireVisibility(dlq) // the visibility timeout of the last receive ends
		return nil
	}
	return fmt.Errorf("unknown step %q", args[0])
}
