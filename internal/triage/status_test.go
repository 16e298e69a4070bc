package triage

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCordumStatusAndCodesAsWritten decides the DLQ entries the newest
// Cordum writes for jobs a person or a policy refused, or that already ran
// (testdata/cordum/status-codes.jsonl). On main before issue 27 each of
// them except the delegation and redelivery ones came out transient from
// its message and was auto-replayed. Upstream (finmaster1/cordum):
//
//   - approval_rejected, DENIED, the reviewer's free text as reason:
//     scheduler/engine.go@04c77a08 replayApprovalPublish (ErrorCode
//     "approval_rejected", Status DENIED, ErrorMessage = approval.Reason);
//     gateway handlers_approvals.go:1566-1586 and the DLQ tap
//     handlers_stream.go:328-357 at e00450ed.
//   - quarantine_failed (FAILED) for a job that SUCCEEDED:
//     engine.go@04c77a08 startAsyncOutputCheck "job remains in succeeded
//     state"; e00450ed:2632-2642; quarantine_panic_failed e00450ed:2500-2532.
//   - safety_unknown (DENIED): engine.go@04c77a08 processJob default
//     decision; e00450ed:1605-1621.
//   - a worker's own code with a DENIED result: handleJobResult emits
//     res.ErrorCode with res.Status (e00450ed:2400-2404).
//   - redelivery_dlq_retry: handleJobRequest, terminal-state redelivery.
//   - delegation.*: scheduler/delegation_dispatch.go@14cb4411:19-27.
func TestCordumStatusAndCodesAsWritten(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g := &Engine{Rules: mustParse(t, string(text)), Snapshot: testSnapshot}
	got := readFixture(t, "cordum:"+filepath.Join("..", "..", "testdata", "cordum", "status-codes.jsonl"))
	tests := []struct {
		id     string
		class  Class
		action Action
	}{
		{"st-approval-rejected", Governance, RequireApproval},
		{"st-quarantine-failed", UnknownCommit, ManualReview},
		{"st-quarantine-panic", UnknownCommit, ManualReview},
		{"st-safety-unknown", Governance, RequireApproval},
		{"st-worker-denied", Governance, RequireApproval},
		{"st-redelivery", Governance, RequireApproval},
		{"st-delegation-revoked", Governance, RequireApproval},
		{"st-delegation-unavailable", Governance, RequireApproval},
		{"st-succeeded-timeout-msg", UnknownCommit, ManualReview},
		{"st-denied-transient-code", Governance, RequireApproval},
		{"st-short-denied", Governance, RequireApproval},
		{"st-fatal", Poison, Quarantine},
		{"st-output-quarantined-denied", UnknownCommit, ManualReview},
		{"st-tier-limit", Governance, RequireApproval},
	}
	if len(got) != len(tests) {
		t.Errorf("fixture has %d entries, %d tested", len(got), len(tests))
	}
	for _, tt := range tests {
		e, ok := got[tt.id]
		if !ok {
			t.Errorf("%s: not in the fixture", tt.id)
			continue
		}
		if e.State.JobStatus == "" {
			t.Errorf("%s: the decoder dropped the job status", tt.id)
		}
		d := decide(g, &e, LedgerView{})
		// The payments rule asks for approval for governance on payments.*,
		// which is the same action; the class is what must hold.
		if d.Class != tt.class || d.Action != tt.action {
			t.Errorf("%s (code %q, status %q, message %q): %s/%s, want %s/%s\n%q",
				tt.id, e.ReasonCode, e.State.JobStatus, e.Message, d.Class, d.Action, tt.class, tt.action, d.Reasons)
		}
	}
}

// TestGenericCodesDeferToStatusAndMessage: a generic code (one that says
// nothing) lets the status, then the message decide; a rules.yaml may list
// its own generic codes.
func TestGenericCodesDeferToStatusAndMessage(t *testing.T) {
	r := mustParse(t, "version: v1\ntaxonomy:\n  generic: [worker_error]\n")
	cases := []struct {
		code, status, msg string
		want              Class
		unrecognised      bool
	}{
		{"job_status_failed", "", "deadline exceeded", Transient, false},
		{"STEP_FAILED", "", "connection refused", Transient, false},
		{"worker_error", "", "connection refused", Transient, false},
		{"worker_error", "JOB_STATUS_TIMEOUT", "invalid json", Transient, false},
		{"worker_error", "JOB_STATUS_DENIED", "connection refused", Governance, false},
		{"unexpected_error", "", "", UnknownCommit, true},
		{"other_worker_error", "", "connection refused", UnknownCommit, true},
		{"other_worker_error", "JOB_STATUS_FAILED_FATAL", "connection refused", Poison, true},
	}
	for _, c := range cases {
		got := r.classifyWith(c.code, c.status, c.msg)
		if got.Class != c.want || got.Unrecognised != c.unrecognised {
			t.Errorf("classifyWith(%q, %q, %q) = %s (unrecognised %v: %s), want %s (unrecognised %v)",
				c.code, c.status, c.msg, got.Class, got.Unrecognised, got.Why, c.want, c.unrecognised)
		}
	}
}
