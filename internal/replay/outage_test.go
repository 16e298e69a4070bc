package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

// waitingFor lets a run wait up to d (on its injected clock) for the
// retries it scheduled, as `reconcile --max-wait d` does.
func waitingFor(d time.Duration, r *Reconciler) *Reconciler {
	r.MaxWait = d
	return r
}

// ledgerRecord reads a key's full ledger record.
func (b *testBundle) ledgerRecord(key string) *idempotency.Record {
	b.t.Helper()
	var rec *idempotency.Record
	if err := b.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		rec, err = tx.Ledger(key)
		return err
	}); err != nil || rec == nil {
		b.t.Fatalf("ledger %s: %v %v", key, rec, err)
	}
	return rec
}

// auditRecords returns every audit record of kind.
func (b *testBundle) auditRecords(kind string) []audit.Record {
	b.t.Helper()
	var out []audit.Record
	if err := b.store.AuditRange(context.Background(), 0, func(_ uint64, s audit.Sealed, derr error) error {
		if derr != nil {
			return derr
		}
		var r audit.Record
		if err := json.Unmarshal(s.Body, &r); err != nil {
			return err
		}
		if r.Kind == kind {
			out = append(out, r)
		}
		return nil
	}); err != nil {
		b.t.Fatal(err)
	}
	return out
}

// refusedURL is a local address where nothing listens: a listener is
// opened and closed, so connecting is refused at once.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/replay"
}

func dispatchOnce(t *testing.T, d Dispatcher) Result {
	t.Helper()
	return d.Dispatch(context.Background(), Request{Entry: &entry.Entry{ID: "e1", Payload: []byte(`{"a":1}`)}, Key: "k1", Attempt: 1})
}

// Issue 15, "budgets an outage cannot burn": each way an attempt provably
// never reaches the target is not_sent.
func TestAttemptsThatNeverReachedTheTargetAreNotSent(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		res := dispatchOnce(t, NewHTTPTarget(refusedURL(t), "", time.Second, nil))
		if res.Outcome != NotSent || !res.TargetDown {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("DNS failure", func(t *testing.T) {
		res := dispatchOnce(t, NewHTTPTarget("http://replay-target.invalid/replay", "", 5*time.Second, nil))
		if res.Outcome != NotSent {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("TLS handshake failure", func(t *testing.T) {
		hit := false
		srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = true }))
		defer srv.Close()
		// Our client does not trust the test server's certificate.
		res := dispatchOnce(t, NewHTTPTarget(srv.URL, "", 5*time.Second, nil))
		if res.Outcome != NotSent || hit {
			t.Fatalf("%+v (handler reached: %v)", res, hit)
		}
	})
	t.Run("request not fully written", func(t *testing.T) {
		// A peer that reads the request line and headers, then hangs up
		// while the (large) body is still being written.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // reset, so the writer fails at once
				}
				c.Close()
			}
		}()
		big := `{"blob":"` + strings.Repeat("x", 32<<20) + `"}`
		h := NewHTTPTarget("http://"+l.Addr().String()+"/replay", "", 10*time.Second, nil)
		res := h.Dispatch(context.Background(), Request{Entry: &entry.Entry{ID: "e1", Payload: []byte(big)}, Key: "k1", Attempt: 1})
		if res.Outcome != NotSent {
			t.Fatalf("%v: %s", res.Outcome, res.Detail)
		}
	})
	t.Run("exec that did not start", func(t *testing.T) {
		res := dispatchOnce(t, &ExecTarget{Command: []string{"/nonexistent/replay-hook"}})
		if res.Outcome != NotSent {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("native connectors", func(t *testing.T) {
		c, err := NewCordumTarget(strings.TrimSuffix(refusedURL(t), "/replay"), time.Second, testCreds)
		if err != nil {
			t.Fatal(err)
		}
		if res := c.Dispatch(context.Background(), req("job_1")); res.Outcome != NotSent || !res.TargetDown {
			t.Fatalf("cordum: %+v", res)
		}
		n, err := NewNexoraTarget(strings.TrimSuffix(refusedURL(t), "/replay"), time.Second, testCreds)
		if err != nil {
			t.Fatal(err)
		}
		if res := n.Dispatch(context.Background(), req("dl_1")); res.Outcome != NotSent || !res.TargetDown {
			t.Fatalf("nexora: %+v", res)
		}
	})
}

// not_sent is recorded and audited, the entry stays retryable, and
// max_replays (3 here) is untouched however many runs the outage lasts.
func TestNotSentIsAuditedAndSpendsNoBudget(t *testing.T) {
	b := newBundle(t, baseRules)
	src := b.jsonl("dlq.jsonl", transient("e1", "k1"))
	dead := NewHTTPTarget(refusedURL(t), "", time.Second, nil)
	for range 6 {
		r := b.reconciler(1)
		r.Router = NewRulesRouter(b.engine.Rules, &Route{Name: "dead", Dispatcher: dead})
		b.run(r, src)
		_ = b.clock.Sleep(context.Background(), time.Hour) // the next cron run
	}
	rec := b.ledgerRecord("k1")
	if rec.Replays != 6 || rec.NotSent != 6 || rec.Budget() != 0 || rec.State != idempotency.Decided {
		t.Fatalf("ledger %+v: six attempts, none counted", rec)
	}
	if er := b.entry("jsonl:e1"); er.Status != store.StatusPending || er.NextAttemptAt.IsZero() {
		t.Fatalf("entry %s %q next %v: retryable", er.Status, er.Reason, er.NextAttemptAt)
	}
	outs := b.auditRecords(audit.KindOutcome)
	if len(outs) != 6 {
		t.Fatalf("%d outcome records, want 6", len(outs))
	}
	for _, o := range outs {
		if o.Outcome != "not_sent" || o.LedgerAfter != string(idempotency.Decided) {
			t.Fatalf("outcome record %+v", o)
		}
	}
	// The target is back: delivered once, on attempt 7, with the same key.
	rep := b.run(b.reconciler(1), src)
	if rep.Replays.Succeeded != 1 || b.sink.perKey()["k1"] != 1 || b.sink.deliveries()[0].Attempt != "7" {
		t.Fatalf("after recovery: %+v %v", rep.Replays, b.sink.deliveries())
	}
}

// A timeout after the request was written stays outcome_unknown and
// spends budget, exactly as before.
func TestTimeoutAfterSendIsNotNotSent(t *testing.T) {
	b := newBundle(t, baseRules)
	b.sink.hang = 300 * time.Millisecond
	r := b.reconciler(1)
	h := NewHTTPTarget(b.sink.URL+"/replay", "", 50*time.Millisecond, nil)
	r.Router = NewRulesRouter(b.engine.Rules, &Route{Name: "slow", Dispatcher: h})
	rep := b.run(r, b.jsonl("dlq.jsonl", transient("e1", "k1")))
	if rep.Replays.Unknown != 1 || rep.Replays.NotSent != 0 {
		t.Fatalf("%+v", rep.Replays)
	}
	if rec := b.ledgerRecord("k1"); rec.NotSent != 0 || rec.Budget() != 1 {
		t.Fatalf("ledger %+v", rec)
	}
}

// Issue 15, "retries are scheduled, not slept": a run dispatches once,
// records the next attempt time and moves on; a run before that time
// skips the entry (not a failure); one after it dispatches again with the
// same key.
func TestRetriesAreScheduledNotSlept(t *testing.T) {
	b := newBundle(t, baseRules)
	b.sink.status = func(_ string, n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	src := b.jsonl("dlq.jsonl", transient("e1", "k1"))
	rep := b.run(b.reconciler(1), src)
	if len(b.clock.slept()) != 0 {
		t.Fatalf("a run slept %v", b.clock.slept())
	}
	er := b.entry("jsonl:e1")
	// exponential_jitter, initial 1s: the first retry is due within 0.5-1.5s.
	wait := er.NextAttemptAt.Sub(b.clock.Now())
	if er.Status != store.StatusPending || wait < 500*time.Millisecond || wait > 1500*time.Millisecond {
		t.Fatalf("after a 500: %s %q, next attempt in %s", er.Status, er.Reason, wait)
	}
	if !strings.HasPrefix(er.Reason, "retry scheduled at ") || rep.NextAttempt != er.NextAttemptAt || rep.Replays.Failed != 0 {
		t.Fatalf("reason %q, report next %v failed %d", er.Reason, rep.NextAttempt, rep.Replays.Failed)
	}
	// Shown by dlq show/list and the API: the EntryRecord's JSON.
	js, _ := json.Marshal(er)
	if !strings.Contains(string(js), `"next_attempt_at":"`+er.NextAttemptAt.UTC().Format(time.RFC3339Nano)) {
		t.Fatalf("entry JSON lacks next_attempt_at: %s", js)
	}

	rep = b.run(b.reconciler(1), src) // too early
	if rep.Scheduled != 1 || len(b.sink.deliveries()) != 1 || rep.Replays.Failed != 0 {
		t.Fatalf("early run: scheduled %d, %d deliveries", rep.Scheduled, len(b.sink.deliveries()))
	}
	if got := b.entry("jsonl:e1"); got.Reason != er.Reason {
		t.Fatalf("an early run rewrote the entry: %q", got.Reason)
	}
	_ = b.clock.Sleep(context.Background(), wait)
	rep = b.run(b.reconciler(1), src)
	d := b.sink.deliveries()
	if rep.Replays.Succeeded != 1 || len(d) != 2 || d[1].Key != "k1" || d[1].Attempt != "2" {
		t.Fatalf("due run: %+v %v", rep.Replays, d)
	}
	if er := b.entry("jsonl:e1"); er.Status != store.StatusReplayed || !er.NextAttemptAt.IsZero() {
		t.Fatalf("after success: %s next %v", er.Status, er.NextAttemptAt)
	}
}

// --max-wait: a run waits for due retries on its clock, never longer than
// the shortest pending retry, and never past its bound.
func TestMaxWaitSleepsOnlyUntilTheShortestRetryWithinItsBound(t *testing.T) {
	b := newBundle(t, baseRules)
	b.sink.status = func(key string, n int) int {
		if key == "k1" && n == 1 || key == "k2" && n <= 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	src := b.jsonl("dlq.jsonl", transient("e1", "k1"), transient("e2", "k2"))
	start := b.clock.Now()
	rep := b.run(waitingFor(3*time.Second, b.reconciler(1)), src)
	// k1: 503 then 200 after ~1s. k2: 503, 503 (after ~1s), then its
	// next retry (~2s later) may or may not fit in the 3s bound.
	if b.sink.perKey()["k1"] != 2 {
		t.Fatalf("k1 delivered %d times", b.sink.perKey()["k1"])
	}
	var total time.Duration
	for _, d := range b.clock.slept() {
		total += d
	}
	if total > 3*time.Second || b.clock.Now().Sub(start) > 3*time.Second {
		t.Fatalf("slept %v in all (%s), past the 3s bound", b.clock.slept(), total)
	}
	if rep.Summary.Total != 2 {
		t.Fatalf("summary counts %d entries, want 2 (each once)", rep.Summary.Total)
	}
	er := b.entry("jsonl:e2")
	if er.Status == store.StatusPending && !er.NextAttemptAt.After(start.Add(3*time.Second)) {
		t.Fatalf("k2 left pending with a retry due within the bound: %v", er.NextAttemptAt)
	}
}

// Issue 15, "a circuit breaker per target": target-down answers open it;
// while open no attempt is made or counted and entries stay pending
// "target unavailable"; after the cool-down one trial half-opens it and
// its success closes it. Each change is audited once.
func TestBreakerOpensHoldsAndClosesAfterOneTrial(t *testing.T) {
	b := newBundle(t, baseRules)
	down := true
	b.sink.status = func(string, int) int {
		if down {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	var entries []map[string]any
	for _, id := range []string{"e1", "e2", "e3", "e4", "e5"} {
		entries = append(entries, transient(id, "k"+id))
	}
	src := b.jsonl("dlq.jsonl", entries...)
	br := &Breakers{Failures: 3, Cooldown: 5 * time.Minute, Clock: b.clock}
	run := func() *Report {
		r := b.reconciler(1)
		r.Breakers = br
		return b.run(r, src)
	}
	rep := run()
	if rep.Replays.Dispatched != 3 || rep.Unavailable != 2 {
		t.Fatalf("first run: %+v unavailable %d", rep.Replays, rep.Unavailable)
	}
	st := br.States()
	if len(st) != 1 || st[0].State != BreakerOpen || !st[0].Until.Equal(b.clock.Now().Add(5*time.Minute)) {
		t.Fatalf("breaker %+v", st)
	}
	for _, ref := range []string{"jsonl:e4", "jsonl:e5"} {
		er := b.entry(ref)
		if er.Status != store.StatusPending || !strings.HasPrefix(er.Reason, "target unavailable") {
			t.Fatalf("%s: %s %q", ref, er.Status, er.Reason)
		}
		if v := b.ledger("k" + strings.TrimPrefix(ref, "jsonl:")); v.Replays != 0 {
			t.Fatalf("%s spent budget while the breaker was open: %+v", ref, v)
		}
	}
	_ = b.clock.Sleep(context.Background(), 2*time.Minute) // retries due, breaker still open
	rep = run()
	if rep.Replays.Dispatched != 0 || rep.Unavailable != 5 {
		t.Fatalf("while open: %+v unavailable %d", rep.Replays, rep.Unavailable)
	}
	down = false
	_ = b.clock.Sleep(context.Background(), 3*time.Minute)
	rep = run()
	if rep.Replays.Succeeded != 5 || br.States()[0].State != BreakerClosed {
		t.Fatalf("after the cool-down: %+v breaker %+v", rep.Replays, br.States())
	}
	var changes []string
	for _, a := range b.auditRecords(audit.KindBreaker) {
		changes = append(changes, a.Outcome)
	}
	if strings.Join(changes, ",") != "open,half_open,closed" {
		t.Fatalf("audited breaker changes %v", changes)
	}
	if n := len(b.sink.deliveries()); n != 3+5 {
		t.Fatalf("%d deliveries, want 3 before opening and 5 after", n)
	}
}

// A half-open trial that fails opens the breaker again for a full
// cool-down; answers that say the target is up (a 500, a 400) never open it.
func TestBreakerCountsOnlyTargetDownAnswers(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	br := &Breakers{Failures: 2, Cooldown: time.Minute, Clock: clk}
	try := func(res Result) bool {
		done, _, ok := br.allow("t")
		if ok {
			done(&res)
		}
		return ok
	}
	for range 5 {
		try(Result{Outcome: Retry, Status: 500})
		try(Result{Outcome: Failed, Status: 400})
	}
	if br.States()[0].State != BreakerClosed {
		t.Fatalf("opened on answers from a live target: %+v", br.States())
	}
	try(Result{Outcome: NotSent, TargetDown: true})
	try(Result{Outcome: Retry, Status: 504, TargetDown: true})
	if try(Result{}) || br.States()[0].State != BreakerOpen {
		t.Fatalf("not open after two target-down answers: %+v", br.States())
	}
	_ = clk.Sleep(context.Background(), time.Minute)
	done, _, ok := br.allow("t")
	if !ok {
		t.Fatal("no trial after the cool-down")
	}
	if _, until, second := br.allow("t"); second || !until.Equal(clk.Now().Add(time.Second)) {
		t.Fatalf("a second request while the half-open trial is out: allowed %v, look again at %v", second, until)
	}
	done(&Result{Outcome: NotSent, TargetDown: true})
	if st := br.States()[0]; st.State != BreakerOpen || !st.Until.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("after a failed trial: %+v", st)
	}
	var got []string
	for _, c := range br.takeChanges() {
		got = append(got, c.From+">"+c.To)
	}
	if strings.Join(got, ",") != "closed>open,open>half_open,half_open>open" {
		t.Fatalf("changes %v", got)
	}
}

// Issue 15 item 4 (issue 14's single runner path): on PostgreSQL the same
// loop schedules retries, and --max-wait takes the due ones again under a
// fresh claim by ref; the next attempt time is stored with the entry.
func TestSharedStoreSchedulesRetriesThroughTheSameLoop(t *testing.T) {
	b, pg := sharedBundle(t)
	b.sink.status = func(_ string, n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	var entries []map[string]any
	for i := range 20 {
		entries = append(entries, transient(fmt.Sprintf("s%02d", i), fmt.Sprintf("sk%02d", i)))
	}
	src := b.jsonl("dlq.jsonl", entries...)
	r := b.worker(pg, "w1")
	r.Clock, r.Breakers = b.clock, &Breakers{Failures: 1000} // about scheduling, not the breaker
	rep, err := r.Run(context.Background(), []source.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replays.Retried != 20 || rep.Replays.Succeeded != 0 || rep.Waiting != 20 {
		t.Fatalf("first run: %+v waiting %d", rep.Replays, rep.Waiting)
	}
	var er *store.EntryRecord
	if err := pg.View(context.Background(), func(tx store.Tx) error {
		var err error
		er, err = tx.Entry("jsonl:s00")
		return err
	}); err != nil || er == nil || er.NextAttemptAt.IsZero() {
		t.Fatalf("next attempt not stored on PostgreSQL: %+v %v", er, err)
	}
	r = waitingFor(time.Hour, b.worker(pg, "w1"))
	r.Clock, r.Breakers = b.clock, &Breakers{Failures: 1000}
	rep, err = r.Run(context.Background(), []source.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replays.Succeeded != 20 || rep.Summary.Total != 20 || len(b.clock.slept()) == 0 {
		t.Fatalf("waiting run: %+v, %d entries, slept %v", rep.Replays, rep.Summary.Total, b.clock.slept())
	}
	for k, n := range b.sink.perKey() {
		if n != 2 {
			t.Errorf("%s sent %d times, want 2 (503, then 200)", k, n)
		}
	}
}

// A replay a person asks for (`dlq replay ID`, the API) goes out now,
// whatever retry time a run scheduled.
func TestSingleReplayDoesNotWaitForTheScheduledRetry(t *testing.T) {
	b := newBundle(t, baseRules)
	b.sink.status = func(_ string, n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	b.run(b.reconciler(1), b.jsonl("dlq.jsonl", transient("e1", "k1")))
	er := b.entry("jsonl:e1")
	if !er.NextAttemptAt.After(b.clock.Now()) {
		t.Fatalf("setup: next attempt %v", er.NextAttemptAt)
	}
	res, err := b.reconciler(1).One(context.Background(), er)
	if err != nil || res.Outcome != Succeeded.String() || b.sink.perKey()["k1"] != 2 {
		t.Fatalf("single replay: %+v %v, %d sends", res, err, b.sink.perKey()["k1"])
	}
}

// While its target's breaker is open, a single replay sends nothing and
// says why (an error, so `dlq replay ID` exits non-zero), spending nothing.
func TestSingleReplayIsRefusedWhileTheBreakerIsOpen(t *testing.T) {
	b := newBundle(t, baseRules)
	br := &Breakers{Failures: 1, Cooldown: time.Hour, Clock: b.clock}
	dead := NewHTTPTarget(refusedURL(t), "", time.Second, nil)
	r := b.reconciler(1)
	r.Breakers, r.Router = br, NewRulesRouter(b.engine.Rules, &Route{Name: "dead", Dispatcher: dead})
	b.run(r, b.jsonl("dlq.jsonl", transient("e1", "k1"), transient("e2", "k2")))
	if st := r.BreakerStates(); len(st) != 1 || st[0].Target != "dead" || st[0].State != BreakerOpen {
		t.Fatalf("breaker %+v", st)
	}
	before := b.ledgerRecord("k2").Replays
	r = b.reconciler(1)
	r.Breakers, r.Router = br, NewRulesRouter(b.engine.Rules, &Route{Name: "dead", Dispatcher: dead})
	_, err := r.One(context.Background(), b.entry("jsonl:e2"))
	if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "target unavailable") {
		t.Fatalf("single replay with the breaker open: %v", err)
	}
	if got := b.ledgerRecord("k2").Replays; got != before {
		t.Fatalf("an attempt was made: %d -> %d", before, got)
	}
}

// hookClock runs onSleep before each of the runner's sleeps.
type hookClock struct {
	*fakeClock
	onSleep func()
}

func (c hookClock) Sleep(ctx context.Context, d time.Duration) error {
	c.onSleep()
	return c.fakeClock.Sleep(ctx, d)
}

// On a shared store a retry taken again within the run (--max-wait) may
// find another worker holding the entry: the run leaves it to that worker
// instead of trying again and again.
func TestMaxWaitLeavesAnEntryAnotherWorkerHolds(t *testing.T) {
	b, pg := sharedBundle(t)
	b.sink.status = func(string, int) int { return http.StatusServiceUnavailable }
	src := b.jsonl("dlq.jsonl", transient("h1", "hk1"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sleeps := 0
	r := waitingFor(time.Hour, b.worker(pg, "w1"))
	r.Breakers = &Breakers{Failures: 1000}
	r.Clock = hookClock{fakeClock: b.clock, onSleep: func() {
		if sleeps++; sleeps == 1 {
			if _, ok, err := pg.ClaimRef(ctx, "jsonl:h1", "w2", time.Hour); err != nil || !ok {
				t.Errorf("w2's claim: %v %v", ok, err)
			}
		}
		if sleeps > 5 {
			cancel()
		}
	}}
	rep, err := r.Run(ctx, []source.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	if sleeps != 1 || rep.Interrupted || rep.Summary.Total != 1 {
		t.Fatalf("slept %d times (want 1), interrupted %v, %d entries counted", sleeps, rep.Interrupted, rep.Summary.Total)
	}
}

// stopAfter stops the run (SIGTERM, serve shutting down) right after a
// worker took entry n.
type stopAfter struct {
	source.Source
	n      int
	cancel context.CancelFunc
}

func (s stopAfter) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		i := 0
		for e, err := range s.Source.Entries(ctx) {
			if !yield(e, err) {
				return
			}
			if i++; i == s.n {
				s.cancel()
			}
		}
	}
}

// A run stopped mid-way is interrupted, not failed: an entry a worker was
// starting when the stop came is left for the next run, and Run returns no
// error (serve logged a clean shutdown as a failed run, "entry X: context
// canceled", when a worker was between two steps of an entry).
func TestStoppedRunIsInterruptedNotFailed(t *testing.T) {
	b := newBundle(t, baseRules)
	var entries []map[string]any
	for i := range 10 {
		entries = append(entries, transient(fmt.Sprintf("c%02d", i), fmt.Sprintf("ck%02d", i)))
	}
	src := b.jsonl("dlq.jsonl", entries...)
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		rep, err := b.reconciler(1).Run(ctx, []source.Source{stopAfter{Source: src, n: 2, cancel: cancel}})
		if err != nil || !rep.Interrupted {
			t.Fatalf("stopped run: err %v, interrupted %v", err, rep.Interrupted)
		}
	}
	b.run(b.reconciler(1), src)
	for k, n := range b.sink.perKey() {
		if n != 1 {
			t.Fatalf("%s sent %d times", k, n)
		}
	}
	if len(b.sink.perKey()) != 10 {
		t.Fatalf("%d keys delivered", len(b.sink.perKey()))
	}
}
