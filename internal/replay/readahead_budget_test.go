package replay

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

type hookDispatcher struct {
	Dispatcher
	before func(Request)
}

func (h *hookDispatcher) Dispatch(ctx context.Context, r Request) Result {
	h.before(r)
	return h.Dispatcher.Dispatch(ctx, r)
}

// A "Replay now" (Reconciler.One, as the console's button and the
// API do, in the same serve process as a scheduled run) that dispatches a
// key after the run read it ahead leaves the run with a stale ledger view:
// the run dispatches the key again on the old replay count, past
// max_replays (2 for tool.flaky.**), and ignoring the retry the other
// dispatch scheduled.
func TestReadAheadReplayNowMeanwhileKeepsMaxReplays(t *testing.T) {
	b := newBundle(t, baseRules)
	flaky := map[string]any{"id": "e1", "topic": "tool.flaky.x", "reason_code": "timeout", "attempts": 3,
		"idempotency_key": "k1", "payload": map[string]any{"x": 1}}
	b.sink.status = func(key string, _ int) int {
		if key == "k1" {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	b.run(b.reconciler(1), b.jsonl("first.jsonl", flaky)) // k1 attempt 1 (503)
	b.clock.now = b.clock.now.Add(time.Hour)              // its retry is due
	vs := &viewSignal{Bolt: b.store, nth: 2, read: make(chan struct{})}
	var oneErr error
	r := b.reconciler(1)
	r.Store = vs
	h := NewHTTPTarget(b.sink.URL+"/replay", b.sink.URL+"/committed", 2*time.Second, nil)
	hd := &hookDispatcher{Dispatcher: h, before: func(req Request) {
		if req.Key != "k2" {
			return
		}
		select {
		case <-vs.read:
		case <-time.After(30 * time.Second):
			oneErr = errors.New("e1 was never read ahead")
		}
		// A person presses Replay now on e1 (its own Reconciler, as
		// Server.ReplayOne builds one): k1 attempt 2 (503), the last one
		// max_replays allows.
		res, err := b.reconciler(1).One(context.Background(), b.entry("jsonl:e1"))
		t.Logf("Replay now: %s %v %v", res.Status, res.Replays, err)
		if err != nil && oneErr == nil {
			oneErr = err
		}
	}}
	r.Router = NewRulesRouter(b.engine.Rules, &Route{Name: "sink", Dispatcher: hd, Prober: h})
	b.run(r, b.jsonl("second.jsonl", transient("e2", "k2"), flaky))
	if oneErr != nil {
		t.Fatal(oneErr)
	}
	v := b.ledger("k1")
	er := b.entry("jsonl:e1")
	t.Logf("k1 deliveries %d, ledger %+v, entry %s %q next %v", b.sink.perKey()["k1"], v, er.Status, er.Reason, er.NextAttemptAt)
	if n := b.sink.perKey()["k1"]; n > 2 {
		t.Fatalf("k1 sent %d times with max_replays 2: the run dispatched on a replay count read before the other dispatch", n)
	}
}
