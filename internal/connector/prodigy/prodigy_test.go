package prodigy

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
)

const prodigyJobID = "mapreduce-1700000000"

func prodigyItems(root string) string {
	return filepath.Join(root, "myrepo", prodigyJobID, "mapreduce", "dlq", prodigyJobID, "items")
}

func TestProdigy(t *testing.T) {
	root := td("prodigy")
	es := readAll(t, "prodigy:"+root)
	if len(es) != 10 {
		t.Fatalf("got %d entries, want 10 (9 items and a broken file)", len(es))
	}
	items := prodigyItems(root)

	tests := []struct {
		id, code, errType, msg string
		attempts               int
		review, ineligible     bool
	}{
		{"item-001", "timeout", "Timeout", "Agent execution timed out", 1, false, false},
		{"item-002", "command_failed", "CommandFailed(exit 101)", "cargo test failed with exit code 101", 2, false, false},
		{"item-003", "timeout", "CommandFailed(exit 124)", "timeout 300 cargo build exited with 124", 1, false, false},
		{"item-004", "resource_exhausted", "CommandFailed(exit 137)", "cargo build killed (exit 137)", 1, false, false},
		{"item-005", "merge_conflict", "MergeConflict", "merge of agent-5 into parent failed: CONFLICT (content) in src/lib.rs", 1, true, false},
		{"item-006", "permission_denied", "PermissionError", "permission denied opening deploy/prod.yaml", 1, false, false},
		{"item-007", "validation_failed", "ValidationFailed", "validation command cargo clippy -- -D warnings failed", 1, false, true},
		{"item-008", "worktree_error", "WorktreeError", "git worktree add failed: already exists", 1, false, false},
		{"item-009", "", "Unknown", "Permission denied: cannot write", 1, false, false},
	}
	for i, tt := range tests {
		e := es[i] // lexical order
		file := filepath.Join(items, tt.id+".json")
		if e.ID != tt.id || e.Origin != file || e.Source != Kind || e.Scope != prodigyJobID {
			t.Errorf("entry %d: id %q origin %q source %q scope %q", i, e.ID, e.Origin, e.Source, e.Scope)
			continue
		}
		if e.Ref() != "prodigy:"+prodigyJobID+"/"+tt.id {
			t.Errorf("%s: ref %q", tt.id, e.Ref())
		}
		if e.ReasonCode != tt.code || e.Message != tt.msg || e.Attempts != tt.attempts {
			t.Errorf("%s: code %q message %q attempts %d", tt.id, e.ReasonCode, e.Message, e.Attempts)
		}
		if last := e.History[len(e.History)-1]; last.ErrorType != tt.errType || last.ReasonCode != tt.code {
			t.Errorf("%s: last failure %+v, want error type %q", tt.id, last, tt.errType)
		}
		if e.State.ManualReviewRequired != tt.review || e.State.ReprocessIneligible != tt.ineligible || e.State.ErrorSignature == "" {
			t.Errorf("%s: state %+v", tt.id, e.State)
		}
		if e.Labels["job_id"] != prodigyJobID || len(e.Labels) != 1 {
			t.Errorf("%s: labels %v", tt.id, e.Labels)
		}
		if want := entry.DeriveKey(Kind, prodigyJobID+"/"+tt.id); e.IdempotencyKey != want || !e.KeyDerived {
			t.Errorf("%s: key %q, want %q", tt.id, e.IdempotencyKey, want)
		}
		var item struct {
			ItemData json.RawMessage `json:"item_data"`
		}
		json.Unmarshal([]byte(mustRead(t, file)), &item)
		if string(e.Payload) != string(item.ItemData) {
			t.Errorf("%s: payload %s, want item_data verbatim %s", tt.id, e.Payload, item.ItemData)
		}
		if e.FirstFailure.IsZero() || e.LastFailure.Before(e.FirstFailure) {
			t.Errorf("%s: failures %v .. %v", tt.id, e.FirstFailure, e.LastFailure)
		}
	}

	h := es[1].History
	if len(h) != 2 || h[0].Attempt != 1 || h[0].ErrorType != "Timeout" || h[1].Attempt != 2 ||
		h[1].Step != "shell: cargo test" || !h[1].Time.Equal(ts("2026-11-05T10:14:00Z")) {
		t.Errorf("item-002 history out of order or incomplete: %+v", h)
	}

	broken := es[9]
	// Named as the item file names it (JOB/items/ITEM.json), where it was
	// in Origin.
	if want := filepath.Join(items, "item-broken.json"); broken.ID != "item-broken" || broken.Scope != prodigyJobID ||
		broken.Origin != want || !broken.Undecodable() {
		t.Errorf("broken item = %+v", broken)
	}
}

func TestProdigyErrorType(t *testing.T) {
	tests := []struct{ raw, variant, code string }{
		{`"Timeout"`, "Timeout", "timeout"},
		{`"ResourceExhausted"`, "ResourceExhausted", "resource_exhausted"},
		{`"ValidationFailed"`, "ValidationFailed", "validation_failed"},
		{`"CommitValidationFailed"`, "CommitValidationFailed", "commit_validation_failed"},
		{`"PermissionError"`, "PermissionError", "permission_denied"},
		{`"WorktreeError"`, "WorktreeError", "worktree_error"},
		{`"MergeConflict"`, "MergeConflict", "merge_conflict"},
		{`"Unknown"`, "Unknown", ""},
		{`"SomethingNew"`, "SomethingNew", ""},
		{`{"CommandFailed":{"exit_code":101}}`, "CommandFailed(exit 101)", "command_failed"},
		{`{"CommandFailed":{"exit_code":124}}`, "CommandFailed(exit 124)", "timeout"},
		{`{"CommandFailed":{"exit_code":137}}`, "CommandFailed(exit 137)", "resource_exhausted"},
		{`{"CommandFailed":{"command":"agent_execution","exit_code":null}}`, "CommandFailed", "command_failed"},
		{`{"Timeout":null}`, "Timeout", "timeout"},
		{`null`, "", ""},
	}
	for _, tt := range tests {
		variant, code, err := prodigyErrorType(json.RawMessage(tt.raw))
		if err != nil || variant != tt.variant || code != tt.code {
			t.Errorf("%s: got (%q, %q, %v), want (%q, %q)", tt.raw, variant, code, err, tt.variant, tt.code)
		}
	}
	for _, raw := range []string{`5`, `[]`, `{}`, `{"A":1,"B":2}`, `{"CommandFailed":{"exit_code":"x"}}`} {
		if _, _, err := prodigyErrorType(json.RawMessage(raw)); err == nil {
			t.Errorf("%s: want an error", raw)
		}
	}
}

func TestProdigyItemDefaults(t *testing.T) {
	e := DecodeItem([]byte(`{"item_id":"x","failure_history":[
		{"attempt_number":1,"timestamp":"2026-11-05T10:00:00Z","error_type":"Timeout","error_message":"a"},
		{"attempt_number":2,"timestamp":"2026-11-05T11:00:00Z","error_type":"Unknown","error_message":"b"}]}`), "items/x.json", "job")
	if e.Undecodable() || e.Attempts != 2 || e.ReasonCode != "" || e.Message != "b" || e.State.ReprocessIneligible ||
		!e.FirstFailure.Equal(ts("2026-11-05T10:00:00Z")) || !e.LastFailure.Equal(ts("2026-11-05T11:00:00Z")) {
		t.Errorf("got %+v", e)
	}
	for _, data := range []string{`{"item_data":{}}`, `{"item_id":""}`, `[]`, `{"item_id":"x","failure_history":[{"error_type":7}]}`, ``} {
		if e := DecodeItem([]byte(data), "p.json", "job"); !e.Undecodable() || e.Ref() != "prodigy:job/p" || e.Origin != "p.json" {
			t.Errorf("%s: got %+v, want undecodable prodigy:job/p from p.json", data, e)
		}
	}
}

// TestProdigyScopes checks that item ids that repeat across jobs stay apart,
// and that only items/*.json files are read.
func TestProdigyScopes(t *testing.T) {
	root := t.TempDir()
	for _, job := range []string{"job-b", "job-a"} {
		dir := filepath.Join(root, "repo", job, "mapreduce", "dlq", job, "items")
		mkdir(t, dir)
		write(t, filepath.Join(dir, "item-0.json"), `{"item_id":"item-0","item_data":{"job":"`+job+`"}}`)
		write(t, filepath.Join(dir, "notes.txt"), "not an item")
		write(t, filepath.Join(filepath.Dir(dir), "index.json"), `{"item_ids":["item-0"]}`)
	}
	write(t, filepath.Join(root, "stray.json"), `{"item_id":"stray"}`)
	es := readAll(t, "prodigy:"+root)
	if len(es) != 2 || es[0].Scope != "job-a" || es[1].Scope != "job-b" {
		t.Fatalf("got %v scopes %q %q, want item-0 in job-a then job-b", ids(es), es[0].Scope, es[len(es)-1].Scope)
	}
	if es[0].IdempotencyKey == es[1].IdempotencyKey || es[0].Ref() == es[1].Ref() {
		t.Errorf("same item id in two jobs shares key or ref: %q %q", es[0].Ref(), es[1].Ref())
	}
	// Pointing at an items directory itself works too.
	items := filepath.Join(root, "repo", "job-a", "mapreduce", "dlq", "job-a", "items")
	if es := readAll(t, "prodigy:"+items); len(es) != 1 || es[0].Scope != "job-a" {
		t.Errorf("reading %s: %+v", items, es)
	}
}

// copyProdigy copies the sample Prodigy DLQ to a temporary directory.
func copyProdigy(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(td("prodigy"))); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestProdigySettle(t *testing.T) {
	root := copyProdigy(t)
	src, err := Parse("prodigy:" + root)
	if err != nil {
		t.Fatal(err)
	}
	wb := src
	// The write-back stamps updated_at as Prodigy's update_index does
	// (iepathos/prodigy src/cook/execution/dlq.rs:635 at 480b22a4,
	// Utc::now()); before issue 27 it kept the old time.
	stamp := time.Date(2026, 11, 27, 8, 0, 0, 123456789, time.UTC)
	src.now = func() time.Time { return stamp }
	es := readAll(t, "prodigy:"+root)
	target := es[2] // item-003
	before := snapshot(t, root)

	if err := wb.Settle(context.Background(), &target, connector.Settlement{Replayed: true}); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, root)
	rel, _ := filepath.Rel(root, target.Origin)
	for name, data := range before {
		switch {
		case name == rel:
			if _, ok := after[name]; ok {
				t.Errorf("%s still exists", name)
			}
		case strings.HasSuffix(name, "index.json"):
			var idx struct {
				ItemIDs   []string `json:"item_ids"`
				ItemCount int      `json:"item_count"`
				JobID     string   `json:"job_id"`
				UpdatedAt string   `json:"updated_at"`
			}
			if err := json.Unmarshal([]byte(after[name]), &idx); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(idx.ItemIDs, "item-003") || len(idx.ItemIDs) != 9 || idx.ItemCount != 9 ||
				idx.JobID != prodigyJobID || idx.UpdatedAt != "2026-11-27T08:00:00.123456789Z" {
				t.Errorf("index after removal: %+v", idx)
			}
		default:
			if after[name] != data {
				t.Errorf("%s changed", name)
			}
		}
	}
	if len(after) != len(before)-1 {
		t.Errorf("%d files before, %d after: a temporary file left behind?", len(before), len(after))
	}
	if err := wb.Settle(context.Background(), &target, connector.Settlement{Replayed: true}); err != nil {
		t.Errorf("marking a removed item again: %v", err)
	}
	if es := readAll(t, "prodigy:"+root); len(es) != 9 {
		t.Errorf("re-read gives %d entries, want 9", len(es))
	}
}

func TestProdigySettleRefuses(t *testing.T) {
	root := copyProdigy(t)
	other := copyProdigy(t)
	src, err := Parse("prodigy:" + filepath.Join(root, "myrepo"))
	if err != nil {
		t.Fatal(err)
	}
	wb := src
	good := readAll(t, "prodigy:"+root)[0]
	items := filepath.Dir(good.Origin)

	outside := readAll(t, "prodigy:"+other)[0]
	write(t, filepath.Join(root, "item-001.json"), mustRead(t, good.Origin))
	notItems := good
	notItems.Origin = filepath.Join(root, "item-001.json")
	index := good
	index.Origin = filepath.Join(filepath.Dir(items), "index.json")
	dotdot := good
	dotdot.Origin = filepath.Join(items, "..", "..", "..", "..", "..", "..", "..", filepath.Base(other),
		"myrepo", prodigyJobID, "mapreduce", "dlq", prodigyJobID, "items", "item-001.json")
	wrongID := good
	wrongID.Origin = filepath.Join(items, "item-002.json")
	wrongScope := good
	wrongScope.Scope = "mapreduce-1"
	broken := readAll(t, "prodigy:"+root)[9]
	cordum := good
	cordum.Source = "cordum"

	tests := []struct {
		name    string
		e       entry.Entry
		outside bool
	}{
		{"another root", outside, true},
		{"not in items/", notItems, true},
		{"index file", index, true},
		{"dot-dot escape", dotdot, true},
		{"scope mismatch", wrongScope, true},
		{"file holds another item", wrongID, false},
		{"undecodable", broken, false},
		{"another kind", cordum, false},
	}
	before, beforeOther := snapshot(t, root), snapshot(t, other)
	for _, tt := range tests {
		err := wb.Settle(context.Background(), &tt.e, connector.Settlement{Replayed: true})
		if err == nil {
			t.Errorf("%s: Settle succeeded", tt.name)
			continue
		}
		if errors.Is(err, ErrOutsideRoot) != tt.outside {
			t.Errorf("%s: %v, want errors.Is ErrOutsideRoot = %v", tt.name, err, tt.outside)
		}
	}
	if !maps.Equal(before, snapshot(t, root)) || !maps.Equal(beforeOther, snapshot(t, other)) {
		t.Error("a refused Settle changed files")
	}
}

func TestProdigyIndexLeftAlone(t *testing.T) {
	for _, index := range []string{
		`{"job_id":"j","items":[{"item_id":"a"}]}`, // not a list of ids
		`{"job_id":"j"}`,
		`not json`,
	} {
		root := t.TempDir()
		items := filepath.Join(root, "j", "items")
		mkdir(t, items)
		write(t, filepath.Join(items, "a.json"), `{"item_id":"a"}`)
		write(t, filepath.Join(root, "j", "index.json"), index)
		src, _ := Parse("prodigy:" + root)
		e := readAll(t, "prodigy:"+root)[0]
		if err := src.Settle(context.Background(), &e, connector.Settlement{Replayed: true}); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, filepath.Join(root, "j", "index.json")); got != index {
			t.Errorf("index %q rewritten to %q", index, got)
		}
		if _, err := os.Stat(filepath.Join(items, "a.json")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("item not removed: %v", err)
		}
	}
	// An "items" list of ids is rewritten, other keys kept.
	root := t.TempDir()
	items := filepath.Join(root, "j", "items")
	mkdir(t, items)
	write(t, filepath.Join(items, "a.json"), `{"item_id":"a"}`)
	write(t, filepath.Join(root, "j", "index.json"), `{"items":["a","b"],"note":{"x":1}}`)
	src, _ := Parse("prodigy:" + root)
	if err := src.Settle(context.Background(), &readAll(t, "prodigy:"+root)[0], connector.Settlement{Replayed: true}); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, filepath.Join(root, "j", "index.json")); got != "{\n  \"items\": [\n    \"b\"\n  ],\n  \"note\": {\n    \"x\": 1\n  }\n}" {
		t.Errorf("index rewritten as %q", got)
	}
}

// snapshot maps every file under root (relative path) to its content.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		m[rel] = mustRead(t, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestProdigyInterruptedWriteBackIsFinished: a write-back interrupted
// between removing the item file and rewriting index.json (here the index
// cannot be rewritten for a while) is finished by the next read of the
// source, which need not yield the entry again. It used to leave index.json
// listing the removed item for good, and the entry never came back for
// the owed write-back to be retried.
func TestProdigyInterruptedWriteBackIsFinished(t *testing.T) {
	root := copyProdigy(t)
	src, err := Parse("prodigy:" + root)
	if err != nil {
		t.Fatal(err)
	}
	target := readAll(t, "prodigy:"+root)[2] // item-003
	index := filepath.Join(filepath.Dir(filepath.Dir(target.Origin)), "index.json")
	saved := mustRead(t, index)
	// The interruption: index.json cannot be rewritten.
	if err := os.Remove(index); err != nil {
		t.Fatal(err)
	}
	mkdir(t, index)
	if err := src.Settle(context.Background(), &target, connector.Settlement{Replayed: true}); err == nil {
		t.Fatal("Settle succeeded with an index it cannot rewrite")
	}
	// Over: a later run reads the source again.
	if err := os.Remove(index); err != nil {
		t.Fatal(err)
	}
	write(t, index, saved)
	later := readAll(t, "prodigy:"+root)
	yielded := slices.ContainsFunc(later, func(e entry.Entry) bool { return e.ID == target.ID })
	var idx struct {
		ItemIDs []string `json:"item_ids"`
	}
	if err := json.Unmarshal([]byte(mustRead(t, index)), &idx); err != nil {
		t.Fatal(err)
	}
	if yielded || slices.Contains(idx.ItemIDs, target.ID) {
		t.Errorf("after a later read: %s yielded %v, index lists it %v; want the write-back finished", target.ID, yielded, slices.Contains(idx.ItemIDs, target.ID))
	}
	if _, err := os.Stat(target.Origin); !os.IsNotExist(err) {
		t.Errorf("item file: %v", err)
	}
	if n := len(later); n != 9 {
		t.Errorf("later read yields %d entries, want 9", n)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(index), ".replayctl-*")); len(left) > 0 {
		t.Errorf("journal left behind: %v", left)
	}
}
