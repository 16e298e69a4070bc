package triage

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
	dlqsource "github.com/replayctl/replayctl/internal/source"
)

// readFixture reads every entry of a bundled source fixture, by id.
func readFixture(t *testing.T, spec string) map[string]entry.Entry {
	t.Helper()
	src, err := dlqsource.Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	got := map[string]entry.Entry{}
	for e, err := range src.Entries(context.Background()) {
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if e.Undecodable() {
			t.Fatalf("%s: %s undecodable: %s", spec, e.ID, e.DecodeError)
		}
		got[e.ID] = e
	}
	return got
}

// TestUpstreamReasonCodes classifies one fixture per reason code and status
// the systems really write. The Cordum fixture lines are DLQEntry records
// (cordum-io/cordum core/infra/store/dlq_store.go: job_id, topic, status,
// reason, reason_code, last_state, attempts, created_at) with the codes the
// scheduler writes (core/controlplane/scheduler/engine.go:
// reasonCodeForSchedulingError -> no_pool_mapping, no_workers,
// pool_overloaded, tenant_limit, dispatch_failed; maxSchedulingRetries ->
// max_scheduling_retries; outputPolicyReason/outputPolicyAsync ->
// output_quarantined[_async]; safety and policy denials, schema
// enforcement, unregistered topics) and the gateway. Nexora writes only
// STEP_FAILED and UNEXPECTED_ERROR (iamvirul/nexora DeadLetterRecord.java
// failureCode), which must fall through to message patterns.
func TestUpstreamReasonCodes(t *testing.T) {
	r := mustParse(t, "version: v1\n")
	td := filepath.Join("..", "..", "testdata")
	cordum := readFixture(t, "cordum:"+filepath.Join(td, "cordum", "reason-codes.jsonl"))
	nexora := readFixture(t, "nexora:"+filepath.Join(td, "nexora", "reason-codes.json"))
	tests := []struct {
		from         map[string]entry.Entry
		id           string
		class        Class
		unrecognised bool
	}{
		{cordum, "rc-max-sched", Transient, false},
		{cordum, "rc-no-workers", Transient, false},
		{cordum, "rc-pool-overloaded", Transient, false},
		{cordum, "rc-tenant-limit", Transient, false},
		{cordum, "rc-dispatch-failed", Transient, false},
		{cordum, "rc-no-pool", Poison, false},
		{cordum, "rc-unknown-topic", Poison, false},
		{cordum, "rc-schema", Poison, false},
		{cordum, "rc-policy-denied", Governance, false},
		{cordum, "rc-safety-denied", Governance, false},
		{cordum, "rc-output-quarantined", UnknownCommit, false},
		{cordum, "rc-output-quarantined-async", UnknownCommit, false},
		{cordum, "rc-max-retries", UnknownCommit, false},
		// No reason code: the terminal status is the signal.
		{cordum, "rc-status-timeout", Transient, false},
		{cordum, "rc-status-cancelled", Governance, false},
		{cordum, "rc-status-denied", Governance, false},
		// A worker's own code says nothing: never auto-replayed.
		{cordum, "rc-worker-generic", UnknownCommit, true},
		// JOB_STATUS_FAILED is generic: the message decides.
		{cordum, "rc-status-failed-timeout-msg", Transient, false},
		{nexora, "11111111-0000-4000-8000-000000000001", Transient, false},
		{nexora, "11111111-0000-4000-8000-000000000002", UnknownCommit, true},
		{nexora, "11111111-0000-4000-8000-000000000003", UnknownCommit, true},
	}
	for _, tt := range tests {
		e, ok := tt.from[tt.id]
		if !ok {
			t.Errorf("%s: not in the fixture", tt.id)
			continue
		}
		c := r.classify(e.ReasonCode, e.Message)
		if c.Class != tt.class || c.Unrecognised != tt.unrecognised {
			t.Errorf("%s (code %q, message %q): class %s unrecognised %v, want %s %v (%s)",
				tt.id, e.ReasonCode, e.Message, c.Class, c.Unrecognised, tt.class, tt.unrecognised, c.Why)
		}
	}
	if len(cordum) != 18 {
		t.Errorf("cordum fixture: %d entries, want 18", len(cordum))
	}
}

// TestBundledRulesMatchCordumCodes: the published Cordum intent (schema
// failures owned by integration-team, denials approved by
// platform-governance) must hold for the codes Cordum writes.
func TestBundledRulesMatchCordumCodes(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g := &Engine{Rules: mustParse(t, string(text)), Snapshot: testSnapshot}
	tests := []struct {
		code   string
		action Action
		owner  string
		group  string
	}{
		{"schema_validation_failed", Quarantine, "integration-team", ""},
		{"policy_denied", RequireApproval, "", "platform-governance"},
		{"safety_denied", RequireApproval, "", "platform-governance"},
	}
	for _, tt := range tests {
		d := decide(g, newEntry(tt.code, "x"), LedgerView{})
		if d.ProposedAction != tt.action {
			t.Errorf("%s: proposed %s, want %s (%v)", tt.code, d.ProposedAction, tt.action, d.Reasons)
		}
		if tt.owner != "" && d.Owner != tt.owner {
			t.Errorf("%s: owner %q, want %q", tt.code, d.Owner, tt.owner)
		}
		if tt.group != "" && d.ApproverGroup != tt.group {
			t.Errorf("%s: approver group %q, want %q", tt.code, d.ApproverGroup, tt.group)
		}
	}
}
