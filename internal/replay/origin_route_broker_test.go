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

	e := &entry.Entry{ID: "m-1#1", Source: "rabbitmq", Origin: origin}
	for name, r := range map[string]*replay.OriginRouter{
		"run":    replay.NewOriginRouter(next, false, replay.Credentials{}, src),
		"stored": replay.NewOriginRouter(next, false, replay.Credentials{}),
	} {
		rt, ok := r.Route(e)
		if !ok || rt.Name != origin || rt.Dispatcher == nil {
			t.Errorf("%s: route %+v %v, want the connector of %s", name, rt, ok, origin)
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
