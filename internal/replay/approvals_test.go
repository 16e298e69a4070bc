package replay

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

func highRisk(id, key string) map[string]any {
	e := transient(id, key)
	e["labels"] = map[string]string{"risk": "high"}
	return e
}

func (b *testBundle) approve(t *testing.T, ref, as string) error {
	t.Helper()
	er := b.entry(ref)
	svc := &approval.Service{Store: b.store, Now: b.clock.Now,
		Config: &approval.Config{Groups: map[string][]string{"platform-oncall": {"alice", "ops-bot"}}}}
	_, err := svc.Decide(context.Background(), approval.Decision{ID: er.ApprovalID, Actor: as, Approve: true})
	return err
}

func TestApprovedReplayRunsOnceAtTheNextReconcile(t *testing.T) {
	b := newBundle(t, baseRules)
	src := b.jsonl("dlq.jsonl", highRisk("h1", "k1"))
	rep := b.run(b.reconciler(1), src)
	if rep.ApprovalsOpened != 1 || len(b.sink.deliveries()) != 0 {
		t.Fatalf("approvals %d deliveries %d", rep.ApprovalsOpened, len(b.sink.deliveries()))
	}
	// Reconciling again asks nothing new.
	if rep := b.run(b.reconciler(1), src); rep.ApprovalsOpened != 0 {
		t.Fatalf("asked twice: %d", rep.ApprovalsOpened)
	}
	if err := b.approve(t, "jsonl:h1", "ops-bot"); err == nil {
		t.Fatal("the requester approved their own request")
	}
	if err := b.approve(t, "jsonl:h1", "alice"); err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), src)
	if n := b.sink.perKey()["k1"]; n != 1 {
		t.Fatalf("approved replay delivered %d times", n)
	}
	b.run(b.reconciler(1), src)
	if n := b.sink.perKey()["k1"]; n != 1 {
		t.Fatalf("approved replay delivered again: %d", n)
	}
	var a *store.Approval
	_ = b.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		a, err = tx.Approval(b.entry("jsonl:h1").ApprovalID)
		return err
	})
	if a == nil || !a.Used || a.State != store.ApprovalApproved {
		t.Fatalf("approval %+v", a)
	}
}

func TestChangedPolicyMakesAnApprovalNotApply(t *testing.T) {
	b := newBundle(t, baseRules)
	src := b.jsonl("dlq.jsonl", highRisk("h1", "k1"))
	b.run(b.reconciler(1), src)
	if err := b.approve(t, "jsonl:h1", "alice"); err != nil {
		t.Fatal(err)
	}
	// The policy now quarantines high-risk entries outright.
	dir := t.TempDir()
	bundled, err := os.ReadFile("../../policies/replayctl.rego")
	if err != nil {
		t.Fatal(err)
	}
	stricter := string(bundled) + "\nwanted contains \"quarantine\" if high_risk\n"
	if err := os.WriteFile(filepath.Join(dir, "replayctl.rego"), []byte(stricter), 0o644); err != nil {
		t.Fatal(err)
	}
	eng, _, err := policy.LoadEngine(context.Background(), filepath.Join(b.dir, "rules.yaml"), dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	b.engine = eng
	b.run(b.reconciler(1), src)
	if n := len(b.sink.deliveries()); n != 0 {
		t.Fatalf("approval bypassed a policy that now denies: %d deliveries", n)
	}
	if er := b.entry("jsonl:h1"); er.Action != triage.Quarantine {
		t.Fatalf("action %s", er.Action)
	}
}

func TestApprovalNeverBypassesACommittedKey(t *testing.T) {
	b := newBundle(t, baseRules)
	// The same job twice: once low risk (replayed at once), once high risk.
	low := transient("l1", "k1")
	high := highRisk("h1", "k1")
	high["payload"] = low["payload"]
	src := b.jsonl("dlq.jsonl", low, high)
	b.run(b.reconciler(1), src)
	if n := b.sink.perKey()["k1"]; n != 1 {
		t.Fatalf("delivered %d", n)
	}
	if er := b.entry("jsonl:h1"); er.Action != triage.Skip {
		t.Fatalf("committed key not skipped: %s", er.Action)
	}
}

// Issue 14 (a): a request raised after the compensating read said
// not_committed carries that result in its evidence. The approve paths
// recompute the evidence with DecideStored; before, they decided without
// the probe, so every such approval was refused as stale and the entry
// could never be replayed.
func TestNotCommittedProbeApprovalCanBeGranted(t *testing.T) {
	b := newBundle(t, baseRules)
	ctx := context.Background()
	b.sink.committed["u-1"] = http.StatusNotFound
	src := b.jsonl("dlq.jsonl", map[string]any{"id": "u1", "topic": "tool.github.pr.create",
		"reason_code": "partial_external_write", "idempotency_key": "u-1"})
	b.run(b.reconciler(1), src)
	er := b.entry("jsonl:u1")
	if er.Action != triage.RequireApproval || er.Probe != triage.ProbeNotCommitted {
		t.Fatalf("setup: %s probe %q", er.Action, er.Probe)
	}
	d, err := (&Planner{Engine: b.engine, Ledger: b.store}).DecideStored(ctx, er)
	if err != nil {
		t.Fatal(err)
	}
	var a *store.Approval
	_ = b.store.View(ctx, func(tx store.Tx) error { a, err = tx.Approval(er.ApprovalID); return err })
	if a == nil || d.EvidenceHash != a.Evidence {
		t.Fatalf("recomputed evidence %s, request's %+v", d.EvidenceHash, a)
	}
	svc := &approval.Service{Store: b.store, Now: b.clock.Now,
		Config: &approval.Config{Groups: map[string][]string{"platform-oncall": {"alice"}}}}
	if _, err := svc.Decide(ctx, approval.Decision{ID: er.ApprovalID, Actor: "alice", Approve: true, CurrentEvidence: d.EvidenceHash}); err != nil {
		t.Fatalf("approval of a not_committed request: %v", err)
	}
	b.run(b.reconciler(1), src)
	if n := b.sink.perKey()["u-1"]; n != 1 {
		t.Fatalf("approved replay delivered %d times", n)
	}
}

// Issue 14 (b): an expired request was never replaced (its id is derived
// from the evidence, and requestApproval returned when one existed), so
// the entry waited for good. The next reconcile now asks again under a
// new id, and that request can be granted.
func TestExpiredRequestIsReplacedByTheNextReconcile(t *testing.T) {
	b := newBundle(t, baseRules)
	ctx := context.Background()
	src := b.jsonl("dlq.jsonl", highRisk("h1", "k1"))
	b.run(b.reconciler(1), src)
	first := b.entry("jsonl:h1").ApprovalID
	b.clock.mu.Lock()
	b.clock.now = b.clock.now.Add(DefaultApprovalTTL + time.Minute)
	b.clock.mu.Unlock()
	rep := b.run(b.reconciler(1), src)
	second := b.entry("jsonl:h1").ApprovalID
	if rep.ApprovalsOpened != 1 || second == first || second == "" {
		t.Fatalf("after expiry: %d requests opened, id %s -> %s", rep.ApprovalsOpened, first, second)
	}
	get := func(id string) *store.Approval {
		var a *store.Approval
		_ = b.store.View(ctx, func(tx store.Tx) error { var err error; a, err = tx.Approval(id); return err })
		return a
	}
	if a := get(first); a == nil || a.State != store.ApprovalExpired {
		t.Fatalf("old request: %+v", a)
	}
	if a := get(second); a == nil || a.State != store.ApprovalPending {
		t.Fatalf("new request: %+v", a)
	}
	// Asked once: the next run does not ask again.
	if rep := b.run(b.reconciler(1), src); rep.ApprovalsOpened != 0 {
		t.Fatalf("asked again: %d", rep.ApprovalsOpened)
	}
	if err := b.approve(t, "jsonl:h1", "alice"); err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), src)
	if n := b.sink.perKey()["k1"]; n != 1 {
		t.Fatalf("approved re-request delivered %d times", n)
	}
}

// An expired request can be asked again at once (replayctl approvals
// rerequest ID), and the new request can be granted; a pending one
// cannot be re-requested.
func TestRerequestAnExpiredApproval(t *testing.T) {
	b := newBundle(t, baseRules)
	ctx := context.Background()
	src := b.jsonl("dlq.jsonl", highRisk("h1", "k1"))
	b.run(b.reconciler(1), src)
	first := b.entry("jsonl:h1").ApprovalID
	if _, err := Rerequest(ctx, b.store, first, "bob", b.clock.Now(), time.Hour); !errors.Is(err, ErrState) {
		t.Fatalf("re-request of a pending request: %v, want ErrState", err)
	}
	later := b.clock.Now().Add(DefaultApprovalTTL + time.Minute)
	n, err := Rerequest(ctx, b.store, first, "bob", later, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if n.ID == first || n.State != store.ApprovalPending || !n.ExpiresAt.Equal(later.Add(time.Hour)) {
		t.Fatalf("new request %+v", n)
	}
	if er := b.entry("jsonl:h1"); er.ApprovalID != n.ID {
		t.Fatalf("entry points at %s, want %s", er.ApprovalID, n.ID)
	}
	if err := b.approve(t, "jsonl:h1", "alice"); err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), src)
	if got := b.sink.perKey()["k1"]; got != 1 {
		t.Fatalf("delivered %d times", got)
	}
}

// The evidence can change and then change back (a label flips and is
// restored at the source). The first request went stale when it changed;
// when it is back, the entry must get a new pending request that can be
// granted, not be pointed at the stale one again: before the fix the
// entry was left on the stale request with nothing pending, and
// re-requesting it said "the evidence is again the one asked on", so the
// entry could never be approved.
func TestEvidenceBackToAStaleRequestsAsksAgain(t *testing.T) {
	b := newBundle(t, baseRules)
	ctx := context.Background()
	asked := func(labels map[string]string) *store.Approval {
		t.Helper()
		e := highRisk("h1", "k1")
		e["labels"] = labels
		b.run(b.reconciler(1), b.jsonl("dlq.jsonl", e))
		er := b.entry("jsonl:h1")
		var a *store.Approval
		if err := b.store.View(ctx, func(tx store.Tx) (err error) {
			a, err = tx.Approval(er.ApprovalID)
			return err
		}); err != nil || a == nil {
			t.Fatalf("approval %q of h1: %v", er.ApprovalID, err)
		}
		return a
	}
	first := asked(map[string]string{"risk": "high", "owner": "payments"})
	second := asked(map[string]string{"risk": "high", "owner": "billing"})
	if second.ID == first.ID || second.State != store.ApprovalPending {
		t.Fatalf("after the owner changed: %s %s (first %s)", second.ID, second.State, first.ID)
	}
	third := asked(map[string]string{"risk": "high", "owner": "payments"})
	if third.State != store.ApprovalPending || third.ID == first.ID || third.ID == second.ID {
		t.Fatalf("evidence back to the first request's: entry on %s (%s), want a new pending request (first %s, second %s)",
			third.ID, third.State, first.ID, second.ID)
	}
	if third.Evidence != first.Evidence {
		t.Fatalf("third request asked on %s, want the first's evidence %s", third.Evidence, first.Evidence)
	}
	if err := b.approve(t, "jsonl:h1", "alice"); err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), b.jsonl("dlq.jsonl", func() map[string]any {
		e := highRisk("h1", "k1")
		e["labels"] = map[string]string{"risk": "high", "owner": "payments"}
		return e
	}()))
	if got := b.sink.perKey()["k1"]; got != 1 {
		t.Fatalf("approved entry delivered %d times, want 1", got)
	}
}
