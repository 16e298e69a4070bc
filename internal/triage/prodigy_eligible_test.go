package triage

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestProdigyReprocessEligibleTransient: an item Prodigy marks
// reprocess_eligible for a transient cause is classified as Prodigy does.
// Prodigy writes ErrorType::Unknown for "network", "temporary" and "rate
// limit" messages (classify_error) yet marks them reprocess_eligible
// (is_reprocessable, iepathos/prodigy
// src/cook/execution/mapreduce/dlq_integration.rs:261-275 at 480b22a4),
// and its reprocessor retries exactly the eligible items
// (dlq_reprocessor.rs:335-337). Before issue 27 these went to manual
// review as unrecognised.
func TestProdigyReprocessEligibleTransient(t *testing.T) {
	root := t.TempDir()
	items := filepath.Join(root, "myrepo", "mapreduce-1", "mapreduce", "dlq", "mapreduce-1", "items")
	if err := os.MkdirAll(items, 0o755); err != nil {
		t.Fatal(err)
	}
	// item writes one DeadLetteredItem as create_dlq_item_from_failure
	// builds it (dlq_integration.rs): one failure, the error type, the
	// flags from is_reprocessable and requires_manual_review.
	item := func(id string, errorType any, msg string, eligible, review bool) {
		b, err := json.Marshal(map[string]any{
			"item_id": id, "item_data": map[string]any{"file": id + ".rs"},
			"first_attempt": "2026-11-20T10:00:00Z", "last_attempt": "2026-11-20T10:00:00Z",
			"failure_count": 1,
			"failure_history": []map[string]any{{"attempt_number": 1, "timestamp": "2026-11-20T10:00:00Z",
				"error_type": errorType, "error_message": msg, "agent_id": "agent-" + id,
				"step_failed": "agent_execution", "duration_ms": 1000}},
			"error_signature": "0123456789abcdef", "reprocess_eligible": eligible, "manual_review_required": review,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(items, id+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	item("net", "Unknown", "network unreachable while fetching crates", true, false)
	item("temp", "Unknown", "Temporary failure in name resolution", true, false)
	item("rate", "Unknown", "API rate limit exceeded (429)", true, false)
	item("net-ineligible", "Unknown", "network unreachable", false, false)
	item("net-review", "Unknown", "fatal: network share permission denied", true, true)
	item("net-exit", map[string]any{"CommandFailed": map[string]any{"exit_code": 1}}, "network error, exit code: 1", true, false)
	item("other", "Unknown", "the agent gave up", false, false)

	text, err := os.ReadFile(filepath.Join("..", "..", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g := &Engine{Rules: mustParse(t, string(text)), Snapshot: testSnapshot}
	got := readFixture(t, "prodigy:"+root)
	tests := []struct {
		id     string
		class  Class
		action Action
	}{
		{"net", Transient, AutoReplay},
		{"temp", Transient, AutoReplay},
		{"rate", Transient, AutoReplay},
		// Prodigy would not retry it: a person decides.
		{"net-ineligible", UnknownCommit, ManualReview},
		{"net-review", Governance, ManualReview},
		// The command ran: its worktree may have changed.
		{"net-exit", UnknownCommit, ManualReview},
		{"other", UnknownCommit, ManualReview},
	}
	for _, tt := range tests {
		e, ok := got[tt.id]
		if !ok {
			t.Errorf("%s: not read", tt.id)
			continue
		}
		d := decide(g, &e, LedgerView{})
		if d.Class != tt.class || d.Action != tt.action {
			t.Errorf("%s (code %q, message %q): %s/%s, want %s/%s\n%q", tt.id, e.ReasonCode, e.Message,
				d.Class, d.Action, tt.class, tt.action, d.Reasons)
		}
	}
}
