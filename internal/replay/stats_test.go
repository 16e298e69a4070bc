package replay

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestStatsReportDenialsPatternsAndApprovalLatency(t *testing.T) {
	b := newBundle(t, baseRules)
	src := b.jsonl("dlq.jsonl",
		transient("e1", "k1"),
		transient("e2", "k2"),
		highRisk("h1", "k3"), // proposed auto_replay, the policy asks for approval: denied
		map[string]any{"id": "p1", "reason_code": "schema_invalid", "message": "field 12 invalid", "idempotency_key": "p1"},
		map[string]any{"id": "p2", "reason_code": "schema_invalid", "message": "field 99 invalid", "idempotency_key": "p2"},
	)
	b.run(b.reconciler(1), src)
	b.clock.Sleep(context.Background(), 90*time.Minute)
	if err := b.approve(t, "jsonl:h1", "alice"); err != nil {
		t.Fatal(err)
	}
	st, err := ComputeStats(context.Background(), b.store, b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.Entries != 5 || st.ByClass["poison"] != 2 || st.ByStatus["replayed"] != 2 {
		t.Fatalf("counts %+v", st)
	}
	if st.Decisions != 3 || st.Denied != 1 {
		t.Fatalf("replay decisions %d denied %d, want 3 and 1", st.Decisions, st.Denied)
	}
	// The two schema failures differ only in a number: one pattern, after
	// the three message-less timeouts.
	if p := st.Patterns[1]; p.Count != 2 || p.Signature != "schema_invalid: field # invalid" {
		t.Fatalf("top pattern %+v", p)
	}
	if st.Approvals.Decided != 1 || st.Approvals.LatencyP50 != "1h30m0s" {
		t.Fatalf("approvals %+v", st.Approvals)
	}
	if len(st.Growth) != 1 || st.Growth[0].Count != 5 {
		t.Fatalf("growth %+v", st.Growth)
	}
}

func TestNoOpRerunDoesNotInflateDenialsOrReasons(t *testing.T) {
	b := newBundle(t, baseRules)
	src := b.jsonl("dlq.jsonl", transient("e1", "k1"), highRisk("h1", "k2"),
		map[string]any{"id": "p1", "reason_code": "schema_invalid", "idempotency_key": "p1"})
	for range 3 {
		b.run(b.reconciler(1), src)
	}
	st, err := ComputeStats(context.Background(), b.store, b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.Decisions != 2 || st.Denied != 1 {
		t.Fatalf("after three runs: %d proposed, %d denied; want 2 and 1 (skips are not denials)", st.Decisions, st.Denied)
	}
	if er := b.entry("jsonl:p1"); strings.Count(er.Reason, "held") > 0 || er.Reason == "" {
		t.Fatalf("held entry's reason changed over runs: %q", er.Reason)
	}
	// Resolving the entry that awaits approval closes its request.
	if _, err := Resolve(context.Background(), b.store, "jsonl:h1", "alice", "not needed"); err != nil {
		t.Fatal(err)
	}
	if err := b.approve(t, "jsonl:h1", "alice"); err == nil {
		t.Fatal("approving the request of a resolved entry succeeded")
	}
}
