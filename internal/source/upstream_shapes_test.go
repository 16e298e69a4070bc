package source

import (
	"testing"

	"github.com/replayctl/replayctl/internal/connector/cordum"
	"github.com/replayctl/replayctl/internal/connector/prodigy"
)

// TestCordumListResponses reads Cordum's gateway list shapes from files:
// GET /api/v1/dlq answers {"items": [...]} and GET /api/v1/dlq/page answers
// {"items": [...], "next_cursor": N} (cordum-io/cordum gateway
// handlers_dlq.go). Before, either was one undecodable entry.
func TestCordumListResponses(t *testing.T) {
	for _, tt := range []struct {
		file string
		ids  []string
	}{
		{"page.json", []string{"job_p1", "job_p2"}},
		{"list.json", []string{"job_l1"}},
	} {
		es := readAll(t, "cordum:"+td("cordum", tt.file))
		if len(es) != len(tt.ids) {
			t.Fatalf("%s: %d entries, want %d: %+v", tt.file, len(es), len(tt.ids), es)
		}
		got := byID(t, es)
		for _, id := range tt.ids {
			e, ok := got[id]
			if !ok || e.Undecodable() {
				t.Errorf("%s: %s missing or undecodable: %+v", tt.file, id, e)
			}
		}
	}
	// The cursor key first works too: key order is not fixed.
	e := readAll(t, "cordum:"+writeFile(t, "p.json",
		`{"next_cursor": 7, "items": [{"job_id": "j1", "reason_code": "tenant_limit"}]}`))
	if len(e) != 1 || e[0].ID != "j1" || e[0].ReasonCode != "tenant_limit" {
		t.Errorf("cursor-first page: got %+v", e)
	}
}

// TestCordumStatusAsSignal: an entry with no reason code is classified by
// its terminal status (DLQEntry.Status in cordum-io/cordum
// core/infra/store/dlq_store.go); a bare FAILED is no signal.
func TestCordumStatusAsSignal(t *testing.T) {
	got := byID(t, readAll(t, "cordum:"+td("cordum", "reason-codes.jsonl")))
	if c := got["rc-status-timeout"].ReasonCode; c != "JOB_STATUS_TIMEOUT" {
		t.Errorf("status timeout: code %q", c)
	}
	if c := got["rc-policy-denied"].ReasonCode; c != "policy_denied" {
		t.Errorf("a reason code beats the status: got %q", c)
	}
	if c := cordum.ReasonCode("", "FAILED"); c != "" {
		t.Errorf("bare FAILED: got %q", c)
	}
}

// TestProdigyRefailedItem: Prodigy overwrites the item file on each
// re-failure, keeping failure_count at 1 while attempt_number counts up,
// and item_data is a serde_json::Value that may be null (iepathos/prodigy
// src/cook/execution/dlq.rs DeadLetteredItem, FailureDetail).
func TestProdigyRefailedItem(t *testing.T) {
	es := readAll(t, "prodigy:"+td("prodigy-refailed"))
	if len(es) != 1 {
		t.Fatalf("%d entries, want 1", len(es))
	}
	e := es[0]
	if e.Attempts != 25 {
		t.Errorf("attempts %d, want 25 (last attempt_number)", e.Attempts)
	}
	if string(e.Payload) != "null" {
		t.Errorf("payload %q, want JSON null", e.Payload)
	}
	// failure_count larger than the history still wins.
	e = prodigy.DecodeItem([]byte(`{"item_id":"x","failure_count":9,"failure_history":[
		{"attempt_number":2,"timestamp":"2026-11-05T10:00:00Z","error_type":"Timeout","error_message":"a"}]}`), "items/x.json", "job")
	if e.Attempts != 9 || e.Payload != nil {
		t.Errorf("attempts %d payload %q, want 9 and no payload", e.Attempts, e.Payload)
	}
}

// TestProdigyNewerItem reads an item as newer Prodigy writes it: a
// CommitValidationFailed error type, a failure with json_log_location
// (skipped when None), a CommandFailed struct variant earlier in the
// history and worktree_artifacts filled in (iepathos/prodigy
// src/cook/execution/dlq.rs at ef879f2: FailureDetail.json_log_location,
// ErrorType::CommitValidationFailed, WorktreeArtifacts). The last failure
// decides the reason; the extra fields change nothing.
func TestProdigyNewerItem(t *testing.T) {
	es := readAll(t, "prodigy:"+td("prodigy-newer"))
	if len(es) != 1 || es[0].Undecodable() {
		t.Fatalf("entries: %+v", es)
	}
	e := es[0]
	if e.ID != "item-commit" || e.ReasonCode != "commit_validation_failed" || e.Attempts != 2 {
		t.Errorf("id %q reason %q attempts %d", e.ID, e.ReasonCode, e.Attempts)
	}
	if len(e.History) != 2 || e.History[0].ReasonCode != "command_failed" || e.History[0].ErrorType != "CommandFailed(exit 1)" {
		t.Errorf("history: %+v", e.History)
	}
	if string(e.Payload) != `{"file": "src/lib.rs", "priority": 2}` {
		t.Errorf("payload %s", e.Payload)
	}
}
