package replay

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

func TestReconcileDeliversEveryAutoReplayExactlyOnce(t *testing.T) {
	b := newBundle(t, baseRules)
	entries := []map[string]any{
		transient("e1", "order-1:email"),
		transient("e2", "order-2:email"),
		transient("e3", "order-3:email"),
		{"id": "p1", "topic": "tool.jira.create", "reason_code": "schema_invalid", "idempotency_key": "p1"},
		{"id": "g1", "topic": "tool.jira.create", "reason_code": "denied", "idempotency_key": "g1"},
		{"id": "h1", "topic": "tool.email.send", "reason_code": "timeout", "idempotency_key": "h1", "labels": map[string]string{"risk": "high"}},
	}
	src := b.jsonl("dlq.jsonl", entries...)
	rep := b.run(b.reconciler(4), src)

	got := b.sink.perKey()
	want := []string{"order-1:email", "order-2:email", "order-3:email"}
	if keys := sortedKeys(got); strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Fatalf("delivered keys %v, want %v", keys, want)
	}
	for k, n := range got {
		if n != 1 {
			t.Errorf("key %s delivered %d times", k, n)
		}
	}
	for _, d := range b.sink.deliveries() {
		if d.Attempt != "1" || !strings.HasPrefix(d.EntryID, "e") || !strings.Contains(d.Body, d.EntryID+"@example.com") {
			t.Errorf("delivery headers/body wrong: %+v", d)
		}
	}
	if rep.Replays.Succeeded != 3 || rep.Summary.ByAction[triage.Quarantine] != 1 || rep.Summary.ByAction[triage.RequireApproval] != 2 {
		t.Fatalf("report %+v %+v", rep.Replays, rep.Summary.ByAction)
	}
	if v := b.ledger("order-1:email"); v.State != triage.StateSucceeded || v.Replays != 1 {
		t.Fatalf("ledger %+v", v)
	}

	// A second run over the same source delivers nothing and says why.
	rep2 := b.run(b.reconciler(4), src)
	if n := len(b.sink.deliveries()); n != 3 {
		t.Fatalf("second run delivered again: %d deliveries", n)
	}
	if rep2.Summary.ByAction[triage.Skip] != 3 || rep2.Replays.Dispatched != 0 {
		t.Fatalf("second run report %+v %+v", rep2.Replays, rep2.Summary.ByAction)
	}
	er := b.entry("jsonl:e1")
	if er.Status != store.StatusReplayed || !strings.Contains(er.Reason, triage.AlreadyCommitted) {
		t.Fatalf("entry after second run: %s %q", er.Status, er.Reason)
	}
	// The changed decision (replay -> skip) is recorded once; a third run
	// that decides the same again records nothing.
	if rep2.DecisionsWritten != 3 {
		t.Fatalf("second run recorded %d decisions, want the 3 that changed to skip", rep2.DecisionsWritten)
	}
	if rep3 := b.run(b.reconciler(4), src); rep3.DecisionsWritten != 0 {
		t.Fatalf("third run recorded %d unchanged decisions", rep3.DecisionsWritten)
	}
	// Ingest is idempotent: no duplicate entries.
	n := 0
	_ = b.store.Entries(context.Background(), func(*store.EntryRecord) error { n++; return nil })
	if n != len(entries) {
		t.Fatalf("%d stored entries after two runs, want %d", n, len(entries))
	}
}

func TestRetryableFailuresBackOffThenSucceed(t *testing.T) {
	b := newBundle(t, baseRules)
	b.sink.status = func(_ string, n int) int {
		if n < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	// The retries are scheduled, and this run waits for them (--max-wait)
	// on the injected clock.
	b.run(waitingFor(time.Hour, b.reconciler(1)), b.jsonl("dlq.jsonl", transient("e1", "k1")))

	if n := b.sink.perKey()["k1"]; n != 3 {
		t.Fatalf("delivered %d times, want 3 (two 503s then 200)", n)
	}
	sl := b.clock.slept()
	if len(sl) != 2 {
		t.Fatalf("slept %v, want two backoff waits", sl)
	}
	// exponential_jitter around 1s then 2s, randomisation factor 0.5.
	for i, want := range []time.Duration{time.Second, 2 * time.Second} {
		if sl[i] < want/2 || sl[i] > want*3/2 {
			t.Errorf("wait %d = %s, want within 50%% of %s", i, sl[i], want)
		}
	}
	v := b.ledger("k1")
	if v.State != triage.StateSucceeded || v.Replays != 3 {
		t.Fatalf("ledger %+v", v)
	}
	for i, d := range b.sink.deliveries() {
		if d.Attempt != fmt.Sprint(i+1) || d.Key != "k1" {
			t.Errorf("delivery %d: %+v (same key, counted attempts)", i, d)
		}
	}
}

func TestBackoffIsCappedAtMax(t *testing.T) {
	b := newBundle(t, `version: v1
dlq_rules:
  - match: {class: transient}
    action: auto_replay
    max_replays: 8
    backoff: {strategy: exponential, initial: 1s, max: 4s, multiplier: 3}
`)
	b.sink.status = func(string, int) int { return http.StatusBadGateway }
	r := waitingFor(time.Hour, b.reconciler(1))
	r.Breakers = &Breakers{Failures: 100} // this test is about backoff, not the breaker
	b.run(r, b.jsonl("dlq.jsonl", transient("e1", "k1")))
	want := []time.Duration{time.Second, 3 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
	if got := b.clock.slept(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v (no jitter, capped at max)", got, want)
	}
}

func TestMaxReplaysIsCountedAcrossRunsThenEscalates(t *testing.T) {
	b := newBundle(t, baseRules)
	b.sink.status = func(string, int) int { return http.StatusServiceUnavailable }
	flaky := map[string]any{"id": "f1", "topic": "tool.flaky.sync", "reason_code": "timeout", "idempotency_key": "f1"}
	src := b.jsonl("dlq.jsonl", flaky)

	rep := b.run(waitingFor(time.Hour, b.reconciler(1)), src)
	if n := b.sink.perKey()["f1"]; n != 2 {
		t.Fatalf("first run delivered %d times, want max_replays=2", n)
	}
	er := b.entry("jsonl:f1")
	if er.Status != store.StatusManualReview || !strings.Contains(er.Reason, "max_replays reached") {
		t.Fatalf("after ceiling: %s %q", er.Status, er.Reason)
	}
	if rep.AwaitingPeople != 1 {
		t.Fatalf("awaiting %d", rep.AwaitingPeople)
	}
	// The next run decides from the ledger's count: no more dispatches.
	b.run(b.reconciler(1), src)
	if n := b.sink.perKey()["f1"]; n != 2 {
		t.Fatalf("second run dispatched again: %d", n)
	}
	if v := b.ledger("f1"); v.Replays != 2 || v.State != triage.StateDecided {
		t.Fatalf("ledger %+v", v)
	}
}

func TestRateLimitSpacesDispatches(t *testing.T) {
	b := newBundle(t, baseRules)
	var entries []map[string]any
	for i := range 11 {
		entries = append(entries, transient(fmt.Sprintf("e%02d", i), fmt.Sprintf("k%02d", i)))
	}
	r := b.reconciler(1)
	r.Rate = 5 // per second
	b.run(r, b.jsonl("dlq.jsonl", entries...))
	// 11 dispatches at 5/s with a burst of 1: 10 gaps of 200ms. Each wait
	// is a whole number of gaps, and they add up to at least 2s. Not
	// exactly 2s: the next entry's wait can start before the previous
	// one's sleep has moved this fake clock (which adds every sleep), so
	// the limiter gives it two gaps (seen under load: seven 200ms, one
	// 400ms, two 200ms; 2.2s), while on a real clock both waits end on
	// their own slots.
	var total time.Duration
	for _, d := range b.clock.slept() {
		if d%(200*time.Millisecond) != 0 {
			t.Fatalf("a wait of %s is not a whole number of 200ms gaps (sleeps %v)", d, b.clock.slept())
		}
		total += d
	}
	if total < 2*time.Second {
		t.Fatalf("rate limit waited %s in all, want at least 2s (sleeps %v; deliveries per key %v)", total, b.clock.slept(), b.sink.perKey())
	}
	if len(b.sink.deliveries()) != 11 {
		t.Fatalf("%d deliveries", len(b.sink.deliveries()))
	}
}

func TestHTTPStatusesMapToOutcomes(t *testing.T) {
	cases := []struct {
		status     int
		state      string
		entry      string
		deliveries int
	}{
		{http.StatusOK, triage.StateSucceeded, store.StatusReplayed, 1},
		{http.StatusAccepted, triage.StateSucceeded, store.StatusReplayed, 1},
		{http.StatusConflict, triage.StateSucceeded, store.StatusReplayed, 1},
		{http.StatusBadRequest, triage.StateFailed, store.StatusFailed, 1},
		{http.StatusUnprocessableEntity, triage.StateFailed, store.StatusFailed, 1},
		{http.StatusInternalServerError, triage.StateDecided, store.StatusManualReview, 3},
		{http.StatusTooManyRequests, triage.StateDecided, store.StatusManualReview, 3},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			b := newBundle(t, baseRules)
			b.sink.status = func(string, int) int { return c.status }
			src := b.jsonl("dlq.jsonl", transient("e1", "k1"))
			b.run(waitingFor(time.Hour, b.reconciler(1)), src)
			if v := b.ledger("k1"); v.State != c.state {
				t.Fatalf("ledger %s, want %s", v.State, c.state)
			}
			if er := b.entry("jsonl:e1"); er.Status != c.entry {
				t.Fatalf("entry %s, want %s (%s)", er.Status, c.entry, er.Reason)
			}
			// A second run never re-sends a definite failure or a success.
			b.run(b.reconciler(1), src)
			if n := len(b.sink.deliveries()); n != c.deliveries {
				t.Fatalf("%d deliveries over two runs, want %d", n, c.deliveries)
			}
		})
	}
}

func TestNoResponseAfterSendIsOutcomeUnknownAndNeverRetried(t *testing.T) {
	b := newBundle(t, baseRules)
	b.sink.hang = 300 * time.Millisecond
	r := b.reconciler(1)
	h := NewHTTPTarget(b.sink.URL+"/replay", "", 50*time.Millisecond, nil)
	r.Router = NewRulesRouter(b.engine.Rules, &Route{Name: "slow", Dispatcher: h})
	src := b.jsonl("dlq.jsonl", transient("e1", "k1"))
	rep := b.run(r, src)
	if rep.Replays.Unknown != 1 || b.ledger("k1").State != triage.StateOutcomeUnknown {
		t.Fatalf("report %+v ledger %+v", rep.Replays, b.ledger("k1"))
	}
	b.sink.mu.Lock()
	b.sink.hang = 0
	b.sink.mu.Unlock()
	b.run(r, src)
	if n := len(b.sink.deliveries()); n != 1 {
		t.Fatalf("outcome-unknown key sent %d times", n)
	}
	if er := b.entry("jsonl:e1"); er.Action != triage.ManualReview {
		t.Fatalf("after unknown outcome: %s", er.Action)
	}
}

func TestCompensatingReadDecidesUnknownCommits(t *testing.T) {
	cases := []struct {
		probe  int
		action triage.Action
		ledger string
	}{
		{http.StatusOK, triage.Skip, triage.StateSucceeded},
		{http.StatusNotFound, triage.RequireApproval, triage.StateDecided},
		{http.StatusInternalServerError, triage.ManualReview, triage.StateDecided},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.probe), func(t *testing.T) {
			b := newBundle(t, baseRules)
			b.sink.committed["k1"] = c.probe
			src := b.jsonl("dlq.jsonl", map[string]any{"id": "u1", "topic": "tool.github.pr.create",
				"reason_code": "partial_external_write", "idempotency_key": "k1"})
			b.run(b.reconciler(1), src)
			er := b.entry("jsonl:u1")
			if er.Action != c.action {
				t.Fatalf("action %s, want %s (%s)", er.Action, c.action, er.Reason)
			}
			if v := b.ledger("k1"); v.State != c.ledger {
				t.Fatalf("ledger %s, want %s", v.State, c.ledger)
			}
			if n := len(b.sink.deliveries()); n != 0 {
				t.Fatalf("an unknown commit was dispatched %d times", n)
			}
			// Probing again with the same result records nothing new.
			probes := func() int {
				n := 0
				_ = audit.Each(context.Background(), b.store, audit.Query{Kind: audit.KindProbe}, func(audit.Record) error { n++; return nil })
				return n
			}
			before := probes()
			b.run(b.reconciler(1), src)
			if after := probes(); after != before {
				t.Fatalf("probe records %d -> %d for the same result", before, after)
			}
		})
	}
}

func TestSameKeyWithAnotherPayloadIsQuarantined(t *testing.T) {
	b := newBundle(t, baseRules)
	a := transient("e1", "shared")
	c := transient("e2", "shared") // same key, another payload
	b.run(b.reconciler(1), b.jsonl("dlq.jsonl", a, c))
	if n := b.sink.perKey()["shared"]; n != 1 {
		t.Fatalf("shared key delivered %d times", n)
	}
	er := b.entry("jsonl:e2")
	if er.Action != triage.Quarantine || !strings.Contains(er.Reason, "conflict") {
		t.Fatalf("second payload: %s %q", er.Action, er.Reason)
	}
}

func TestConcurrentWorkersNeverDispatchOneKeyTwice(t *testing.T) {
	b := newBundle(t, baseRules)
	var entries []map[string]any
	for i := range 200 {
		key := fmt.Sprintf("k%02d", i%20)
		e := transient(fmt.Sprintf("e%03d", i), key)
		e["payload"] = map[string]any{"key": key} // copies of one job share their payload
		entries = append(entries, e)
	}
	b.run(b.reconciler(16), b.jsonl("dlq.jsonl", entries...))
	got := b.sink.perKey()
	if len(got) != 20 {
		t.Fatalf("%d keys delivered, want 20", len(got))
	}
	for k, n := range got {
		if n != 1 {
			t.Errorf("key %s delivered %d times", k, n)
		}
	}
}

func TestRecoveryTurnsDispatchingIntoOutcomeUnknown(t *testing.T) {
	b := newBundle(t, baseRules)
	ctx := context.Background()
	// A process died between its intent and its outcome.
	if err := b.store.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Transition(idempotency.Transition{Key: "k1", To: idempotency.Decided, EntryRef: "jsonl:e1"}); err != nil {
			return err
		}
		_, err := tx.Transition(idempotency.Transition{Key: "k1", From: idempotency.Decided, To: idempotency.Dispatching})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r := b.reconciler(1)
	r.Router = NewRulesRouter(b.engine.Rules, &Route{Name: "sink", Dispatcher: NewHTTPTarget(b.sink.URL, "", time.Second, nil)})
	rep := b.run(r, b.jsonl("dlq.jsonl", transient("e1", "k1")))
	if rep.Recovered != 1 || b.ledger("k1").State != triage.StateOutcomeUnknown {
		t.Fatalf("recovered %d, ledger %+v", rep.Recovered, b.ledger("k1"))
	}
	if n := len(b.sink.deliveries()); n != 0 {
		t.Fatalf("a key with an unknown outcome was dispatched blindly (%d)", n)
	}
	if er := b.entry("jsonl:e1"); er.Action != triage.ManualReview {
		t.Fatalf("action %s", er.Action)
	}
}

func TestQuarantineHoldsUntilReleased(t *testing.T) {
	b := newBundle(t, baseRules)
	b.sink.status = func(string, int) int { return http.StatusBadRequest }
	src := b.jsonl("dlq.jsonl", transient("e1", "k1"))
	b.run(b.reconciler(1), src)
	if er := b.entry("jsonl:e1"); er.Hold != store.HoldFailed {
		t.Fatalf("hold %q", er.Hold)
	}
	b.sink.mu.Lock()
	b.sink.status = nil
	b.sink.mu.Unlock()
	b.run(b.reconciler(1), src)
	if n := len(b.sink.deliveries()); n != 1 {
		t.Fatalf("held entry re-sent: %d", n)
	}
	if _, err := Release(context.Background(), b.store, "jsonl:e1", "alice", "target fixed"); err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), src)
	if n := len(b.sink.deliveries()); n != 2 {
		t.Fatalf("released entry not replayed: %d deliveries", n)
	}
	if v := b.ledger("k1"); v.State != triage.StateSucceeded {
		t.Fatalf("ledger %+v", v)
	}
}

func TestResolvedEntriesStayResolved(t *testing.T) {
	b := newBundle(t, baseRules)
	src := b.jsonl("dlq.jsonl", map[string]any{"id": "g1", "reason_code": "denied", "idempotency_key": "g1"})
	b.run(b.reconciler(1), src)
	if _, err := Resolve(context.Background(), b.store, "g1", "alice", "no longer needed"); err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), src)
	if er := b.entry("jsonl:g1"); er.Status != store.StatusResolved {
		t.Fatalf("status %s", er.Status)
	}
	if _, err := Resolve(context.Background(), b.store, "g1", "alice", "again"); err == nil {
		t.Fatal("resolving twice should fail")
	}
}

func TestProdigyItemRemovedOnlyAfterSuccess(t *testing.T) {
	b := newBundle(t, baseRules)
	src := b.prodigyCopy(t)
	b.sink.status = func(key string, _ int) int { return http.StatusOK }
	rep := b.run(b.reconciler(2), src)
	if rep.Replays.Succeeded == 0 {
		t.Fatal("nothing replayed from the prodigy sample")
	}
	removed, kept := 0, 0
	_ = b.store.Entries(context.Background(), func(er *store.EntryRecord) error {
		if er.Entry.Source != "prodigy" || er.Entry.Undecodable() {
			return nil
		}
		_, statErr := os.Stat(er.Entry.Origin)
		switch {
		case er.Status == store.StatusReplayed && os.IsNotExist(statErr):
			removed++
		case er.Status != store.StatusReplayed && statErr == nil:
			kept++
		default:
			t.Errorf("%s: status %s, file err %v", er.Entry.Ref(), er.Status, statErr)
		}
		return nil
	})
	if removed != rep.Replays.Succeeded || kept == 0 {
		t.Fatalf("removed %d (succeeded %d), kept %d", removed, rep.Replays.Succeeded, kept)
	}
}

func TestLimitStopsAfterNEntries(t *testing.T) {
	b := newBundle(t, baseRules)
	r := b.reconciler(2)
	r.Limit = 2
	rep := b.run(r, b.jsonl("dlq.jsonl", transient("e1", "k1"), transient("e2", "k2"), transient("e3", "k3")))
	if rep.Summary.Total != 2 || len(b.sink.deliveries()) != 2 {
		t.Fatalf("total %d deliveries %d", rep.Summary.Total, len(b.sink.deliveries()))
	}
}
