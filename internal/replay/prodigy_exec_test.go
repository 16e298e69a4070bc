package replay

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

// prodigyHome lays out a Prodigy home as Prodigy writes it: DLQ items in
// ~/.prodigy/dlq/REPO/JOB/mapreduce/dlq/JOB/items/ITEM.json (dlq.rs
// DLQStorage::item_path) and the job state in
// ~/.prodigy/state/REPO/mapreduce/jobs/JOB/checkpoint-v{N}.json
// (checkpoint/manager.rs checkpoint_path at 3a2a90d2). Item ids repeat
// across jobs (executor.rs:778 at 480b22a4): both jobs have item_0.
func prodigyHome(t *testing.T) (home string) {
	t.Helper()
	home = filepath.Join(t.TempDir(), ".prodigy")
	item := func(job, id string) {
		dir := filepath.Join(home, "dlq", "myrepo", job, "mapreduce", "dlq", job, "items")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"item_id": id, "item_data": map[string]any{"file": job + "/" + id + ".rs"},
			"first_attempt": "2026-11-20T10:00:00Z", "last_attempt": "2026-11-20T10:00:00Z", "failure_count": 1,
			"failure_history": []map[string]any{{"attempt_number": 1, "timestamp": "2026-11-20T10:00:00Z",
				"error_type": "Timeout", "error_message": "Agent execution timed out", "agent_id": "agent-" + id,
				"step_failed": "agent_execution", "duration_ms": 1000}},
			"error_signature": "0123456789abcdef", "reprocess_eligible": true, "manual_review_required": false})
		if err := os.WriteFile(filepath.Join(dir, id+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	item("mapreduce-1", "item_0")
	item("mapreduce-2", "item_0")
	item("mapreduce-2", "item_1")
	// mapreduce-2's state: v1 before the resume, v2 after it. A resume
	// (prodigy resume-job, which re-runs reprocess-eligible DLQ items,
	// mapreduce_resume.rs:389-396) completed item_0; item_1 failed again.
	state := filepath.Join(home, "state", "myrepo", "mapreduce", "jobs", "mapreduce-2")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, results map[string]any) {
		b, _ := json.Marshal(map[string]any{"job_id": "mapreduce-2", "agent_results": results,
			"completed_agents": []string{}, "total_items": 2, "checkpoint_version": 2})
		if err := os.WriteFile(filepath.Join(state, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("checkpoint-v1.json", map[string]any{"agent-a": map[string]any{"item_id": "item_0", "status": map[string]any{"Failed": "timed out"}}})
	write("checkpoint-v2.json", map[string]any{
		"agent-b": map[string]any{"item_id": "item_0", "status": "Success"},
		"agent-c": map[string]any{"item_id": "item_1", "status": map[string]any{"Failed": "timed out"}},
	})
	return home
}

// TestProdigyExecTargetNamesTheItem: an exec target learns which job,
// repository and item file an item belongs to, in its environment and,
// with stdin: entry, in a JSON object on stdin. Before issue 27 it got
// REPLAY_ENTRY_ID=item_0 and the item data only, the same for item_0 of
// every job.
func TestProdigyExecTargetNamesTheItem(t *testing.T) {
	home := prodigyHome(t)
	out := filepath.Join(t.TempDir(), "calls")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "replay-item.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nf=\""+out+"/$REPLAY_JOB_ID-$REPLAY_ENTRY_ID\"\n"+
		"env | grep '^REPLAY_' | sort > \"$f.env\"\ncat > \"$f.stdin\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := newBundle(t, "version: v1\ntargets:\n  - name: prodigy\n    match: {source: prodigy}\n    exec: {command: ["+
		script+"], stdin: entry}\n")
	src, err := source.Parse("prodigy:" + filepath.Join(home, "dlq", "myrepo"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Engine: b.engine, Store: b.store, Clock: b.clock, Actor: "ops-bot", MaxParallel: 2,
		Router: NewRulesRouter(b.engine.Rules, nil)}
	b.run(r, src)
	env, err := os.ReadFile(filepath.Join(out, "mapreduce-1-item_0.env"))
	if err != nil {
		t.Fatalf("mapreduce-1's item_0 was not replayed: %v", err)
	}
	item := filepath.Join(home, "dlq", "myrepo", "mapreduce-1", "mapreduce", "dlq", "mapreduce-1", "items", "item_0.json")
	for _, want := range []string{"REPLAY_ENTRY_ID=item_0", "REPLAY_JOB_ID=mapreduce-1", "REPLAY_REPO=myrepo",
		"REPLAY_ITEM_PATH=" + item, "REPLAY_ENTRY_REF=prodigy:mapreduce-1/item_0"} {
		if !strings.Contains(string(env), want+"\n") {
			t.Errorf("environment lacks %s:\n%s", want, env)
		}
	}
	raw, err := os.ReadFile(filepath.Join(out, "mapreduce-1-item_0.stdin"))
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		EntryID string            `json:"entry_id"`
		Entry   map[string]string `json:"entry"`
		Payload map[string]string `json:"payload"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatalf("stdin %q: %v", raw, err)
	}
	if in.EntryID != "item_0" || in.Entry["job_id"] != "mapreduce-1" || in.Entry["repo"] != "myrepo" ||
		in.Entry["item_path"] != item || in.Payload["file"] != "mapreduce-1/item_0.rs" {
		t.Errorf("stdin %s", raw)
	}
}

// TestProdigyItemCompletedByResumeIsSettled: `prodigy resume-job` re-runs
// a job's reprocess-eligible DLQ items (mapreduce_resume.rs:389-396,
// 445-467; resume.rs:817-825 at 480b22a4) and never removes them from the
// DLQ. An item whose job checkpoint shows it completed is settled, never
// replayed a second time; the others are replayed.
func TestProdigyItemCompletedByResumeIsSettled(t *testing.T) {
	home := prodigyHome(t)
	b := newBundle(t, baseRules)
	src, err := source.Parse("prodigy:" + filepath.Join(home, "dlq", "myrepo"))
	if err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(2), src)
	if n := len(b.sink.deliveries()); n != 2 {
		t.Errorf("%d replays, want 2 (mapreduce-1/item_0, mapreduce-2/item_1)", n)
	}
	er := b.entry("prodigy:mapreduce-2/item_0")
	if er.Status != store.StatusResolved || !strings.Contains(er.Reason, "completed by prodigy resume-job") ||
		!strings.Contains(er.Reason, "checkpoint-v2.json") {
		t.Errorf("mapreduce-2/item_0: %s %q", er.Status, er.Reason)
	}
	for _, ref := range []string{"prodigy:mapreduce-1/item_0", "prodigy:mapreduce-2/item_1"} {
		if er := b.entry(ref); er.Status != store.StatusReplayed {
			t.Errorf("%s: %s %q", ref, er.Status, er.Reason)
		}
	}
}
