package replay

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// incident fills the DLQ with two causes: 6 email timeouts and 4 payment
// failures (the payments fix is not deployed yet; tool.pay.* is a topic
// the bundled policy lets replay without approval).
func incident(t *testing.T) (*testBundle, []map[string]any) {
	b := newBundle(t, baseRules)
	var entries []map[string]any
	for i := range 6 {
		entries = append(entries, transient(fmt.Sprintf("t%02d", i), fmt.Sprintf("kt%02d", i)))
	}
	for i := range 4 {
		entries = append(entries, map[string]any{"id": fmt.Sprintf("pay%d", i), "topic": "tool.pay.charge", "reason_code": "timeout",
			"message": fmt.Sprintf("charge %d: gateway timeout after %dms", 1000+i, 30000+i), "idempotency_key": fmt.Sprintf("kp%d", i),
			"payload": map[string]any{"n": i}})
	}
	return b, entries
}

func groupByTopic(t *testing.T, gs []store.GroupSummary, topic string) store.GroupSummary {
	t.Helper()
	for _, g := range gs {
		if g.Key.Topic == topic {
			return g
		}
	}
	t.Fatalf("no group for topic %s in %+v", topic, gs)
	return store.GroupSummary{}
}

// A held group's entries, current and future, wait (nothing is sent,
// they are shown in manual review with the hold as the reason); the other
// group replays. A release lets the next run replay them; every change is
// an audit record.
func TestHeldGroupWaitsUntilReleased(t *testing.T) {
	b, entries := incident(t)
	ctx := context.Background()
	groups := &Groups{Store: b.store, Clock: b.clock, Actor: "alice"}
	// The first run with no target: both groups wait in manual review.
	r := b.reconciler(2)
	r.Router = NewRulesRouter(b.engine.Rules, nil)
	b.run(r, b.jsonl("dlq.jsonl", entries...))
	gs, err := groups.List(ctx, 0)
	if err != nil || len(gs) != 2 {
		t.Fatalf("groups %+v %v", gs, err)
	}
	pay := groupByTopic(t, gs, "tool.pay.charge")
	if pay.Total != 4 || pay.Open != 4 || gs[0].Open != 6 {
		t.Fatalf("groups: %+v", gs)
	}
	if _, err := groups.Hold(ctx, pay.ID, "", time.Time{}); !errors.Is(err, store.ErrBadGroup) {
		t.Errorf("a hold without a reason: %v", err)
	}
	if _, err := groups.Release(ctx, pay.ID, "x"); !errors.Is(err, ErrGroupState) {
		t.Errorf("release of a group not held: %v", err)
	}
	if _, err := groups.Hold(ctx, pay.ID, "until the payments fix is deployed", b.clock.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// A new payment failure arrives while the group is held.
	more := append(entries, map[string]any{"id": "pay9", "topic": "tool.pay.charge", "reason_code": "timeout",
		"message": "charge 2000: gateway timeout after 31000ms", "idempotency_key": "kp9", "payload": map[string]any{"n": 9}})
	b.run(b.reconciler(2), b.jsonl("dlq.jsonl", more...))
	sent := b.sink.perKey()
	for i := range 6 {
		if sent[fmt.Sprintf("kt%02d", i)] != 1 {
			t.Errorf("kt%02d sent %d times, want once", i, sent[fmt.Sprintf("kt%02d", i)])
		}
	}
	for _, k := range []string{"kp0", "kp1", "kp2", "kp3", "kp9"} {
		if sent[k] != 0 {
			t.Errorf("held %s was sent", k)
		}
	}
	if er := b.entry("jsonl:pay9"); er.Status != store.StatusManualReview {
		t.Errorf("a new entry of the held group: %s", er.Status)
	}
	// The bulk preview says why.
	p, err := b.bulk(0, 0).PreviewReplay(ctx, BulkFilter{Groups: []string{pay.ID}})
	if err != nil || p.Matched != 5 || p.Why[WhyGroupHeld] != 5 || p.Would != 0 {
		t.Fatalf("preview of the held group: %+v %v", p, err)
	}
	if _, err := groups.Release(ctx, pay.ID, "fix deployed"); err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(2), b.jsonl("dlq.jsonl", more...))
	sent = b.sink.perKey()
	for _, k := range []string{"kp0", "kp1", "kp2", "kp3", "kp9"} {
		if sent[k] != 1 {
			t.Errorf("released %s sent %d times, want once", k, sent[k])
		}
	}
	var kinds []string
	if err := audit.Each(ctx, b.store, audit.Query{Kind: audit.KindGroup}, func(r audit.Record) error {
		kinds = append(kinds, r.Outcome+"/"+r.Actor)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(kinds) != "[held/alice open/alice]" {
		t.Errorf("group audit records: %v", kinds)
	}
}

// A hold past its until ends loudly: the next run opens the group with an
// audit record and tells OnHoldExpired, then decides its entries afresh.
func TestExpiredHoldIsAuditedAndOpened(t *testing.T) {
	b, entries := incident(t)
	ctx := context.Background()
	r := b.reconciler(2)
	r.Router = NewRulesRouter(b.engine.Rules, nil)
	b.run(r, b.jsonl("dlq.jsonl", entries...))
	groups := &Groups{Store: b.store, Clock: b.clock, Actor: "alice"}
	gs, _ := groups.List(ctx, 0)
	pay := groupByTopic(t, gs, "tool.pay.charge")
	if _, err := groups.Hold(ctx, pay.ID, "fix pending", b.clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	b.clock.mu.Lock()
	b.clock.now = b.clock.now.Add(61 * time.Minute)
	b.clock.mu.Unlock()
	var told []ExpiredHold
	r = b.reconciler(2)
	r.OnHoldExpired = func(x ExpiredHold) { told = append(told, x) }
	b.run(r, b.jsonl("dlq.jsonl", entries...))
	if len(told) != 1 || told[0].Group != pay.ID || told[0].Audit == 0 {
		t.Fatalf("expired holds told: %+v", told)
	}
	if n := b.sink.perKey()["kp0"]; n != 1 {
		t.Errorf("after the hold expired kp0 was sent %d times", n)
	}
	g, err := groups.Show(ctx, pay.ID)
	if err != nil || g.Lifecycle == nil || g.Lifecycle.State != store.GroupOpen || g.Lifecycle.By != "replayctl" {
		t.Errorf("group after expiry: %+v %v", g, err)
	}
}

// rules.yaml's groups section changes the signature everywhere at once:
// with ignore_topic one cause across two topics is one group, in the
// store's index and for a hold.
func TestGroupsConfiguredInRules(t *testing.T) {
	b := newBundle(t, baseRules+"groups:\n  ignore_topic: true\n  stack_frames: -1\n")
	ctx := context.Background()
	entries := []map[string]any{
		{"id": "a1", "topic": "tool.email.send", "reason_code": "timeout", "message": "relay timed out after 30s\n\tat relay.Send(relay.go:12)", "idempotency_key": "ka1", "payload": map[string]any{}},
		{"id": "a2", "topic": "tool.sms.send", "reason_code": "timeout", "message": "relay timed out after 31s\n\tat sms.Send(sms.go:99)", "idempotency_key": "ka2", "payload": map[string]any{}},
	}
	r := b.reconciler(1)
	r.Router = NewRulesRouter(b.engine.Rules, nil)
	b.run(r, b.jsonl("dlq.jsonl", entries...))
	groups := &Groups{Store: b.store, Clock: b.clock, Actor: "alice"}
	gs, err := groups.List(ctx, 0)
	if err != nil || len(gs) != 1 || gs[0].Total != 2 || gs[0].Key.Topic != "" || gs[0].Key.Error != "timeout: relay timed out after #" {
		t.Fatalf("groups %+v %v", gs, err)
	}
	if _, err := groups.Hold(ctx, gs[0].ID, "relay fix", time.Time{}); err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), b.jsonl("dlq.jsonl", entries...))
	if n := len(b.sink.perKey()); n != 0 {
		t.Errorf("held across topics, yet %d keys were sent", n)
	}
}
