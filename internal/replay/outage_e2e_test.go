package replay

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// advance moves the test's clock (the scheduler's wall time between
// runs); it is not a sleep of the runner, so slept() does not see it.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// outageTarget is a real local HTTP target at a fixed address that is
// down (nothing listens: connection refused), then answers 503, then
// recovers. It counts per idempotency key the requests it accepted (200).
type outageTarget struct {
	addr string
	mu   sync.Mutex
	srv  *http.Server
	up   bool // false: 503
	seen map[string]int
	took map[string]int
}

func newOutageTarget(t *testing.T) *outageTarget {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &outageTarget{addr: l.Addr().String(), seen: map[string]int{}, took: map[string]int{}}
	l.Close() // down: connecting is refused
	t.Cleanup(func() {
		if o.srv != nil {
			o.srv.Close()
		}
	})
	return o
}

// listen brings the target's process back, answering 503 until recover.
func (o *outageTarget) listen(t *testing.T) {
	l, err := net.Listen("tcp", o.addr)
	if err != nil {
		t.Fatalf("the target's address was taken meanwhile: %v", err)
	}
	o.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		o.mu.Lock()
		o.seen[key]++
		up := o.up
		if up {
			o.took[key]++
		}
		o.mu.Unlock()
		if !up {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = o.srv.Serve(l) }()
}

func (o *outageTarget) recover() {
	o.mu.Lock()
	o.up = true
	o.mu.Unlock()
}

func (o *outageTarget) counts() (seen, took map[string]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	seen, took = map[string]int{}, map[string]int{}
	for k, v := range o.seen {
		seen[k] = v
	}
	for k, v := range o.took {
		took[k] = v
	}
	return seen, took
}

// The end-to-end scenario of issue 15: a downstream is down (connection
// refused) for 20 minutes, then answers 503 for 10, then recovers, while
// a scheduler reconciles transient entries every 3 minutes. Every
// entry is delivered exactly once after recovery, none lands in manual
// review because of the outage, not_sent attempts leave max_replays
// untouched, the breaker opened and closed (audited), and no run slept.
func TestOutageThenRecoveryDeliversEveryEntryOnceWithoutBurningBudgets(t *testing.T) {
	t.Parallel() // fsync-bound, its own files
	// 300 entries rather than issue 15's 1,000: the properties are per
	// entry (each delivered once, its budget spent only by attempts that
	// reached the target) and per breaker (opened by the refusals, closed
	// after recovery), and 300 are still 38 times MaxParallel, so every
	// run sends several windows. 1,000 took 11.2 s of CPU under -race.
	const n = 300
	b := newBundle(t, `version: v1
defaults:
  max_replays: 3
  backoff: {strategy: exponential_jitter, initial: 30s, max: 4m, multiplier: 2}
dlq_rules:
  - name: transient
    match: {class: transient}
    action: auto_replay
`)
	entries := make([]map[string]any, n)
	for i := range n {
		entries[i] = transient(fmt.Sprintf("e%04d", i), fmt.Sprintf("k%04d", i))
	}
	src := b.jsonl("dlq.jsonl", entries...)
	tgt := newOutageTarget(t)
	h := NewHTTPTarget("http://"+tgt.addr+"/replay", "", 2*time.Second, nil)
	// As serve does: one set of breakers for all the scheduled runs.
	breakers := NewBreakers(b.clock)
	start := b.clock.Now()
	var reports []*Report
	for run := 0; run < 40; run++ {
		elapsed := b.clock.Now().Sub(start)
		switch {
		case elapsed >= 30*time.Minute:
			tgt.recover()
		case elapsed >= 20*time.Minute && tgt.srv == nil:
			tgt.listen(t)
		}
		r := &Reconciler{Engine: b.engine, Store: b.store, Clock: b.clock, Actor: "scheduler", MaxParallel: 8,
			Breakers: breakers, Router: NewRulesRouter(b.engine.Rules, &Route{Name: "orders", Dispatcher: h})}
		rep := b.run(r, src)
		reports = append(reports, rep)
		if rep.Replays.Failed+rep.Replays.Unknown != 0 || rep.AwaitingPeople != 0 {
			t.Fatalf("run %d at +%s: %+v, %d awaiting people", run, elapsed, rep.Replays, rep.AwaitingPeople)
		}
		if rep.StatusCounts[store.StatusReplayed] == n && rep.Replays.Dispatched == 0 {
			break // a run with everything replayed and nothing sent
		}
		b.clock.advance(3 * time.Minute)
	}
	if s := b.clock.slept(); len(s) != 0 {
		t.Fatalf("runs slept %v", s)
	}

	seen, took := tgt.counts()
	if len(took) != n {
		t.Fatalf("%d keys delivered, want %d", len(took), n)
	}
	for k, c := range took {
		if c != 1 {
			t.Errorf("key %s delivered %d times", k, c)
		}
	}
	notSent, during503 := 0, 0
	for _, k := range sortedKeys(seen) {
		during503 += seen[k] - took[k]
	}
	for i := range n {
		key := fmt.Sprintf("k%04d", i)
		rec := b.ledgerRecord(key)
		notSent += rec.NotSent
		if rec.State != idempotency.Succeeded {
			t.Fatalf("%s: ledger %s", key, rec.State)
		}
		// Only attempts that reached the target count: the 503s and the
		// final 200, never the refused ones.
		if rec.Budget() != seen[key] || rec.Replays != rec.NotSent+seen[key] {
			t.Fatalf("%s: ledger %+v, target saw it %d times", key, rec, seen[key])
		}
		if er := b.entry("jsonl:" + fmt.Sprintf("e%04d", i)); er.Status != store.StatusReplayed || !er.NextAttemptAt.IsZero() {
			t.Fatalf("%s: %s %q", key, er.Status, er.Reason)
		}
	}
	if notSent == 0 || during503 == 0 {
		t.Fatalf("the outage was not exercised: %d not_sent, %d answered 503", notSent, during503)
	}
	for _, d := range b.auditRecords(audit.KindDecision) {
		if d.Action == triage.ManualReview {
			t.Fatalf("an entry went to manual review: %+v", d)
		}
	}
	var changes []string
	opened, closed := false, false
	for _, a := range b.auditRecords(audit.KindBreaker) {
		changes = append(changes, a.Outcome)
		opened = opened || a.Outcome == BreakerOpen
		closed = closed || a.Outcome == BreakerClosed
	}
	if !opened || !closed || changes[len(changes)-1] != BreakerClosed {
		t.Fatalf("breaker changes %v: want it opened and, at the end, closed", changes)
	}
	if st := breakers.States(); len(st) != 1 || st[0].State != BreakerClosed {
		t.Fatalf("breakers %+v", st)
	}
	t.Logf("%d runs over %s; %d not_sent attempts, %d answered 503, %d breaker changes; last run %+v",
		len(reports), b.clock.Now().Sub(start), notSent, during503, len(changes), reports[len(reports)-1].Replays)
}
