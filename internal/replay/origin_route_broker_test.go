package replay_test

import (
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/triage"
)

// A broker entry replays through its own connector: the run's (which
// holds its spec's credentials) for the entries it read, else one opened
// again from a stored entry's Origin; --target (Override) wins, and an
// Origin that opens nothing falls through to the rules.
func TestOriginRouterRoutesBrokerEntries(t *testing.T) {
	src, err := source.Parse("rabbitmq:amqp://app:pw@127.0.0.1:5672/?queue=orders.dlq")
	if err != nil {
		t.Fatal(err)
	}
	origin := src.(interface{ Origin() string }).Origin()
	def := &replay.Route{Name: "rules-default", Dispatcher: nil}
	next := replay.NewRulesRouter(&triage.Rules{}, def)

	e := &entry.Entry{ID: "m-1#1", Source: "rabbitmq", Origin: origin, Topic: "orders"}
	// The route is the destination (the queue that dead-lettered the
	// message), without credentials: its breaker and --rate are that
	// queue's (issue 28).
	const dest = "rabbitmq:amqp://127.0.0.1:5672/?queue=orders"
	for name, r := range map[string]*replay.OriginRouter{
		"run":    replay.NewOriginRouter(next, false, replay.Credentials{}, src),
		"stored": replay.NewOriginRouter(next, false, replay.Credentials{}),
	} {
		rt, ok := r.Route(e)
		if !ok || rt.Name != dest || rt.Dispatcher == nil {
			t.Errorf("%s: route %+v %v, want the connector of %s named %s", name, rt, ok, origin, dest)
		}
	}
	if rt, _ := replay.NewOriginRouter(next, true, replay.Credentials{}, src).Route(e); rt.Name != "rules-default" {
		t.Errorf("--target: route %q, want the default", rt.Name)
	}
	bad := &entry.Entry{ID: "m-2", Source: "rabbitmq", Origin: "rabbitmq:amqp://127.0.0.1/"} // no queue
	if rt, _ := replay.NewOriginRouter(next, false, replay.Credentials{}).Route(bad); rt.Name != "rules-default" {
		t.Errorf("unopenable origin: route %q, want the rules' default", rt.Name)
	}
}

// One broker source, two destinations, two routes: Kafka records of two
// original topics, SQS messages of two source queues.
func TestBrokerRoutesArePerDestination(t *testing.T) {
	for _, c := range []struct {
		spec, kind string
		topics     [2]string
		want       [2]string
	}{
		{"kafka:127.0.0.1:9092?topic=all.DLT&group=g", "kafka", [2]string{"orders", "payments"},
			[2]string{"kafka:127.0.0.1:9092?topic=orders", "kafka:127.0.0.1:9092?topic=payments"}},
		{"sqs:http://127.0.0.1:9324/000000000000/all-dlq?region=us-east-1", "sqs", [2]string{"orders", "payments"},
			[2]string{"sqs:http://127.0.0.1:9324/000000000000/orders", "sqs:http://127.0.0.1:9324/000000000000/payments"}},
	} {
		src, err := source.Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		origin := src.(interface{ Origin() string }).Origin()
		r := replay.NewOriginRouter(replay.NewRulesRouter(&triage.Rules{}, nil), false, replay.Credentials{}, src)
		for i, topic := range c.topics {
			rt, ok := r.Route(&entry.Entry{ID: topic, Source: c.kind, Origin: origin, Topic: topic})
			if !ok || rt.Name != c.want[i] {
				t.Errorf("%s entry for %s: route %q, want %q", c.kind, topic, rt.Name, c.want[i])
			}
		}
	}
}
