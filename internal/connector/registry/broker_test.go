package registry

import (
	"errors"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
)

func noEnv(string) string { return "" }

// The brokers' specs open through Open like every other system's, and a
// broker's usage error shows its own form and never its password.
func TestOpenBrokers(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	for _, spec := range []string{
		"rabbitmq:amqp://127.0.0.1:5672/?queue=orders.dlq",
		"kafka:127.0.0.1:9092?topic=orders.DLT&group=replayctl",
		"sqs:http://127.0.0.1:4566/000000000000/orders-dlq",
	} {
		s, err := Open(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		b, ok := s.(Broker)
		if !ok {
			t.Fatalf("%s: %T is not a broker connector", spec, s)
		}
		kind, _, _ := strings.Cut(spec, ":")
		if !strings.HasPrefix(b.Origin(), kind+":") {
			t.Errorf("%s: origin %q", spec, b.Origin())
		}
	}
	for _, c := range []struct{ spec, want, secret string }{
		{"kafka:orders-dlq", "use kafka:HOST:PORT", ""},
		{"rabbitmq:amqp://u:s3cret-77@localhost/", "missing ?queue=QUEUE", "s3cret-77"},
		{"sqs:not a url", "use sqs:QUEUE_URL", ""},
		{"pubsub:orders", "jsonl, rabbitmq, kafka, sqs", ""},
	} {
		_, err := Open(c.spec)
		var ue *connector.UsageError
		if !errors.As(err, &ue) {
			t.Fatalf("%s: %v, want a usage error", c.spec, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q in it", c.spec, err, c.want)
		}
		if c.secret != "" && strings.Contains(err.Error(), c.secret) {
			t.Errorf("%s: the error carries the password: %v", c.spec, err)
		}
	}
}

// A stored broker entry finds its connector again from its Origin; a
// run's own connector (credentials from its spec) is the one found for
// the entries it read, and one client serves many entries.
func TestFinderBrokers(t *testing.T) {
	run, err := Open("rabbitmq:amqp://app:pw-9@127.0.0.1:5672/?queue=orders.dlq")
	if err != nil {
		t.Fatal(err)
	}
	origin := run.(Broker).Origin()
	if strings.Contains(origin, "pw-9") || strings.Contains(origin, "app") {
		t.Fatalf("origin %q holds credentials", origin)
	}
	e := &entry.Entry{ID: "m-1", Source: "rabbitmq", Origin: origin}

	f := &Finder{}
	got, ok := f.BrokerFor(e)
	if !ok || got.Origin() != origin {
		t.Fatalf("stored entry: %v %v, want the connector of %s", got, ok, origin)
	}
	if again, _ := f.BrokerFor(e); again != got {
		t.Errorf("a second entry of the same queue opened a second connector")
	}
	f.Add(run)
	if got, _ := f.BrokerFor(e); got != run {
		t.Errorf("the run's own connector was not found for its entry")
	}

	f = &Finder{}
	f.Add(run)
	other := &entry.Entry{ID: "m-2", Source: "rabbitmq", Origin: strings.Replace(origin, "orders.dlq", "billing.dlq", 1)}
	if b, ok := f.BrokerFor(other); !ok || b == run || b.Origin() != other.Origin {
		t.Errorf("another queue's entry: %v %v", b, ok)
	}
	for _, bad := range []*entry.Entry{
		{ID: "x", Source: "rabbitmq", Origin: "kafka:127.0.0.1:9092?topic=t&group=g"}, // not its kind
		{ID: "x", Source: "rabbitmq", Origin: "rabbitmq:amqp://127.0.0.1/"},           // no queue
		{ID: "x", Source: "cordum", Origin: "rabbitmq:amqp://127.0.0.1/?queue=q"},     // not a broker's
	} {
		if b, ok := f.BrokerFor(bad); ok {
			t.Errorf("%+v found %v", bad, b)
		}
		if s, ok := ForEntry(bad, Credentials{}); ok && bad.Source != "cordum" {
			t.Errorf("%+v: ForEntry found %v", bad, s)
		}
	}

	k := &entry.Entry{ID: "orders.DLT/0/4", Source: "kafka", Origin: "kafka:127.0.0.1:9092?group=replayctl&topic=orders.DLT"} // as kafka.Conn.Origin writes it
	if s, ok := ForEntry(k, Credentials{}); !ok || s.(Broker).Origin() != k.Origin {
		t.Errorf("kafka entry: %v %v", s, ok)
	}
	sq := &entry.Entry{ID: "m", Source: "sqs", Origin: "sqs:http://127.0.0.1:4566/000000000000/orders-dlq"}
	if _, ok := forBroker(sq, noEnv); ok {
		t.Errorf("sqs entry without a region anywhere opened")
	}
	if s, ok := ForEntry(sq, Credentials{AWSRegion: "eu-west-1"}); !ok || s.(Broker).Origin() != sq.Origin {
		t.Errorf("sqs entry, region from the environment: %v %v", s, ok)
	}
}

// A broker's credentials come from the environment, never a flag.
func TestCredentialsFromEnvBrokers(t *testing.T) {
	env := map[string]string{"RABBITMQ_USERNAME": "app", "RABBITMQ_PASSWORD": "pw", "AWS_DEFAULT_REGION": "us-east-2"}
	c := CredentialsFromEnv(func(k string) string { return env[k] })
	for k, want := range map[string]string{"RABBITMQ_USERNAME": "app", "RABBITMQ_PASSWORD": "pw", "AWS_REGION": "us-east-2"} {
		if got := c.getenv(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}
