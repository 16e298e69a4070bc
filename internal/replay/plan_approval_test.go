package replay

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/triage"
)

func (b *testBundle) decidePlan(t *testing.T, id, as string) error {
	t.Helper()
	svc := &approval.Service{Store: b.store, Now: b.clock.Now,
		Config: &approval.Config{Groups: map[string][]string{"platform-oncall": {"alice", "ops-bot"}}}}
	_, err := svc.Decide(context.Background(), approval.Decision{ID: id, Actor: as, Approve: true})
	return err
}

// A plan is approved as previewed: runs start executes exactly its entry
// set at its velocity, once; later arrivals are excluded and listed.
func TestApprovedPlanRunsExactlyItsSet(t *testing.T) {
	b, entries := outage(t)
	ctx := context.Background()
	f := BulkFilter{Classes: []string{"transient"}}
	req := b.bulk(0, 0)
	req.Reconciler.Rate = 50
	p, err := req.RequestPlan(ctx, f, PlanRequest{Reason: "after INC-42"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Refs) != 45 || p.PolicySnapshot == "" || p.Rate != 50 || p.ApproverGroup != "platform-oncall" || len(p.Samples) != 5 || p.Blast == nil {
		t.Fatalf("plan %+v", p)
	}
	if _, err := b.bulk(0, 0).ExecutePlan(ctx, p.ID); !errors.Is(err, ErrPlanNotApproved) {
		t.Fatalf("an unapproved plan ran: %v", err)
	}
	if err := b.decidePlan(t, p.ID, "ops-bot"); !errors.Is(err, approval.ErrSelfApproval) {
		t.Fatalf("four-eyes: %v", err)
	}
	if err := b.decidePlan(t, p.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	// Three more failures arrive after the approval.
	var more []map[string]any
	for i := range 3 {
		more = append(more, transient(fmt.Sprintf("late%d", i), fmt.Sprintf("kl%d", i)))
	}
	r := b.reconciler(2)
	r.Router = NewRulesRouter(b.engine.Rules, nil)
	b.run(r, b.jsonl("dlq.jsonl", append(entries, more...)...))

	rep, err := b.bulk(0, 0).ExecutePlan(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Plan == nil || rep.Plan.ApprovedBy != "alice" || len(rep.Plan.Excluded) != 3 || rep.Replays["succeeded"] != 45 {
		t.Fatalf("plan run %+v replays %v", rep.Plan, rep.Replays)
	}
	sent := b.sink.perKey()
	if len(sent) != 45 || sent["kl0"] != 0 {
		t.Errorf("sent %d keys (late kl0: %d); want the plan's 45 only", len(sent), sent["kl0"])
	}
	if _, err := b.bulk(0, 0).ExecutePlan(ctx, p.ID); !errors.Is(err, ErrPlanNotApproved) {
		t.Errorf("a plan ran twice: %v", err)
	}
}

// A plan whose rules and policy changed, or that expired, refuses to start.
func TestPlanRefusesAChangedSnapshotOrExpiry(t *testing.T) {
	b, _ := outage(t)
	ctx := context.Background()
	f := BulkFilter{Classes: []string{"transient"}}
	p, err := b.bulk(0, 0).RequestPlan(ctx, f, PlanRequest{Reason: "x", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.decidePlan(t, p.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	// CheckPlan gives ExecutePlan's answer without using the plan up.
	for range 2 {
		if _, _, err := b.bulk(0, 0).CheckPlan(ctx, p.ID); err != nil {
			t.Fatalf("an approved, current plan does not check: %v", err)
		}
	}
	changed := b.bulk(0, 0)
	eng := *b.engine
	eng.Snapshot = "sha256:other"
	changed.Reconciler.Engine = &eng
	if _, err := changed.ExecutePlan(ctx, p.ID); !errors.Is(err, ErrPlanChanged) {
		t.Errorf("changed snapshot: %v", err)
	}
	if _, _, err := changed.CheckPlan(ctx, p.ID); !errors.Is(err, ErrPlanChanged) {
		t.Errorf("check, changed snapshot: %v", err)
	}
	b.clock.mu.Lock()
	b.clock.now = b.clock.now.Add(2 * time.Hour)
	b.clock.mu.Unlock()
	if _, err := b.bulk(0, 0).ExecutePlan(ctx, p.ID); !errors.Is(err, ErrPlanExpired) {
		t.Errorf("expired plan: %v", err)
	}
	if _, _, err := b.bulk(0, 0).CheckPlan(ctx, p.ID); !errors.Is(err, ErrPlanExpired) {
		t.Errorf("check, expired plan: %v", err)
	}
	if n := len(b.sink.perKey()); n != 0 {
		t.Errorf("a refused plan sent %d keys", n)
	}
	if _, err := b.bulk(0, 0).RequestPlan(ctx, BulkFilter{Classes: []string{string(triage.Poison)}}, PlanRequest{Reason: "x"}); !errors.Is(err, ErrState) {
		t.Errorf("a plan with nothing to replay: %v", err)
	}
}
