package replay

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Issue 14: an entry stuck after max_replays could only be re-armed by
// resolving it. `dlq release` re-arms it (audited): the next reconcile
// decides afresh, with max_replays counted again from the release.
func TestReleaseReArmsAnEntryStuckAfterMaxReplays(t *testing.T) {
	b := newBundle(t, baseRules)
	ctx := context.Background()
	down := true
	b.sink.status = func(string, int) int {
		if down {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	src := b.jsonl("dlq.jsonl", map[string]any{"id": "f1", "topic": "tool.flaky.sync", "reason_code": "timeout", "idempotency_key": "f1"})
	b.run(waitingFor(time.Hour, b.reconciler(1)), src)
	if er := b.entry("jsonl:f1"); er.Status != store.StatusManualReview || b.sink.perKey()["f1"] != 2 {
		t.Fatalf("setup: %s after %d deliveries", er.Status, b.sink.perKey()["f1"])
	}
	if _, err := Release(ctx, b.store, "jsonl:f1", "alice", "target fixed"); err != nil {
		t.Fatalf("release of an entry stuck after max_replays: %v", err)
	}
	if er := b.entry("jsonl:f1"); er.Status != store.StatusPending {
		t.Fatalf("after release: %s", er.Status)
	}
	down = false
	b.run(b.reconciler(1), src)
	if n := b.sink.perKey()["f1"]; n != 3 {
		t.Fatalf("after release: %d deliveries, want one more (3)", n)
	}
	if er := b.entry("jsonl:f1"); er.Status != store.StatusReplayed {
		t.Fatalf("after release and run: %s %q", er.Status, er.Reason)
	}
	if v := b.ledger("f1"); v.State != triage.StateSucceeded {
		t.Fatalf("ledger %+v", v)
	}
	n := 0
	_ = audit.Each(ctx, b.store, audit.Query{Kind: audit.KindRelease}, func(r audit.Record) error {
		if r.Actor == "alice" && strings.Contains(r.Reason, "re-armed") {
			n++
		}
		return nil
	})
	if n != 1 {
		t.Fatalf("%d audited re-arms, want 1", n)
	}
}

// An entry with no target can be released too; one whose outcome is
// unknown cannot (a probe or an approval decides it, never a release).
func TestReleaseOfNoTargetAndOutcomeUnknown(t *testing.T) {
	b := newBundle(t, baseRules)
	ctx := context.Background()
	r := b.reconciler(1)
	r.Router = NewRulesRouter(b.engine.Rules, nil)
	src := b.jsonl("dlq.jsonl", transient("n1", "nt-1"))
	b.run(r, src)
	if er := b.entry("jsonl:n1"); er.Status != store.StatusManualReview {
		t.Fatalf("no target: %s", er.Status)
	}
	if _, err := Release(ctx, b.store, "jsonl:n1", "alice", "target added"); err != nil {
		t.Fatalf("release of a no-target entry: %v", err)
	}
	b.run(b.reconciler(1), src)
	if n := b.sink.perKey()["nt-1"]; n != 1 {
		t.Fatalf("after release with a target: %d deliveries", n)
	}

	// A target that answers after the dispatcher gave up: outcome_unknown.
	u := newBundle(t, baseRules)
	u.sink.hang = 300 * time.Millisecond
	ru := u.reconciler(1)
	ru.Router = NewRulesRouter(u.engine.Rules, &Route{Name: "slow", Dispatcher: NewHTTPTarget(u.sink.URL+"/replay", "", 50*time.Millisecond, nil)})
	unknown := u.jsonl("u.jsonl", transient("u1", "unk-1"))
	u.run(ru, unknown)
	u.run(ru, unknown) // no probe: a person must look (manual_review)
	if v := u.ledger("unk-1"); v.State != triage.StateOutcomeUnknown {
		t.Fatalf("setup: %+v", v)
	}
	_, err := Release(ctx, u.store, "jsonl:u1", "alice", "try again")
	if !errors.Is(err, ErrState) {
		t.Fatalf("release of an outcome_unknown key: %v, want ErrState", err)
	}
	// The refusal names the ways out: with no probe there is no approval
	// request to look for.
	if !strings.Contains(err.Error(), "--probe") || !strings.Contains(err.Error(), "dlq resolve") {
		t.Errorf("refusal does not say what settles it: %v", err)
	}
}
