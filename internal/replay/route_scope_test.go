package replay

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
)

// byTopic routes an entry by its topic.
type byTopic map[string]*Route

func (b byTopic) Route(e *entry.Entry) (Route, bool) {
	rt, ok := b[e.Topic]
	if !ok {
		return Route{}, false
	}
	return *rt, true
}

// --rate applies per destination (issue 28): 10 entries for each of two
// routes, alternating, at 5/s: each route waits 9 gaps of 200ms, and a
// route's wait never holds the other's dispatch back (one pacer for the
// run would wait 19 gaps).
func TestRateIsPerRoute(t *testing.T) {
	b := newBundle(t, baseRules)
	var entries []map[string]any
	for i := range 20 {
		e := transient(fmt.Sprintf("e%02d", i), fmt.Sprintf("k%02d", i))
		e["topic"] = []string{"tool.email.send", "tool.sms.send"}[i%2]
		entries = append(entries, e)
	}
	r := b.reconciler(1)
	h := NewHTTPTarget(b.sink.URL+"/replay", "", 2*time.Second, nil)
	r.Router = byTopic{"tool.email.send": {Name: "email", Dispatcher: h}, "tool.sms.send": {Name: "sms", Dispatcher: h}}
	r.Rate, r.Window = 5, 1 // one entry at a time, in order: the waits add up exactly
	b.run(r, b.jsonl("dlq.jsonl", entries...))
	var total time.Duration
	for _, d := range b.clock.slept() {
		total += d
	}
	if total != 9*200*time.Millisecond {
		t.Fatalf("rate limit waited %s in all, want 1.8s: 9 gaps per route, the routes side by side (sleeps %v)", total, b.clock.slept())
	}
	if n := len(b.sink.deliveries()); n != 20 {
		t.Fatalf("%d deliveries, want 20", n)
	}
}

// downTarget answers as a broker does when its queue or topic cannot be
// reached: nothing was sent, the target is down.
type downTarget struct{ calls int }

func (d *downTarget) Dispatch(context.Context, Request) Result {
	d.calls++
	return Result{Outcome: NotSent, TargetDown: true, Detail: "connect: connection refused"}
}

// The breaker is per destination too: with one of two routes down, its
// breaker opens after its own failures and holds its entries, while every
// entry of the other route is replayed.
func TestBreakerIsPerRoute(t *testing.T) {
	b := newBundle(t, baseRules)
	var entries []map[string]any
	for i := range 20 {
		e := transient(fmt.Sprintf("e%02d", i), fmt.Sprintf("k%02d", i))
		e["topic"] = []string{"tool.email.send", "tool.sms.send"}[i%2]
		entries = append(entries, e)
	}
	r := b.reconciler(1)
	down := &downTarget{}
	r.Router = byTopic{"tool.email.send": {Name: "rabbitmq:amqp://h:5672/?queue=email", Dispatcher: NewHTTPTarget(b.sink.URL+"/replay", "", 2*time.Second, nil)},
		"tool.sms.send": {Name: "rabbitmq:amqp://h:5672/?queue=sms", Dispatcher: down}}
	r.Window = 1
	r.Breakers = NewBreakers(b.clock)
	r.Breakers.Failures = 3
	rep := b.run(r, b.jsonl("dlq.jsonl", entries...))
	if n := len(b.sink.deliveries()); n != 10 {
		t.Fatalf("the route that is up got %d of its 10 replays", n)
	}
	if down.calls != 3 {
		t.Errorf("the route that is down was called %d times, want 3 (its breaker open after 3)", down.calls)
	}
	if rep.Replays.Succeeded != 10 {
		t.Errorf("replays %+v, want 10 succeeded", rep.Replays)
	}
}
