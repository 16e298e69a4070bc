package replay

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

// TestLiveUndecodableQuarantinedOnceAsTheDLQDrains: a record of a live
// Cordum DLQ that replayctl cannot decode was named by its position on the
// gateway's page (URL#INDEX). Records ahead of it leave the DLQ between
// runs (replayed, deleted), so the next run found it at another index and
// quarantined it again under a new name: one record, one more quarantined
// entry per run, none ever cleaned. It is named by its job_id now, so two
// runs quarantine it once. The page is the gateway's: {"items",
// "next_cursor"}, next_cursor null on a short page (cordum-io/cordum
// core/controlplane/gateway/handlers_dlq.go:82-94 at 51b6141).
func TestLiveUndecodableQuarantinedOnceAsTheDLQDrains(t *testing.T) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	b := newBundle(t, baseRules)
	// Handled at the source (replay_status resolved): skipped, never
	// replayed; they only stand ahead of the bad record on run 1.
	ok := func(id string) string {
		return fmt.Sprintf(`{"job_id":%q,"topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason_code":"pool_overloaded","replay_status":"resolved","created_at":"2026-11-20T10:00:0%cZ"}`, id, id[len(id)-1])
	}
	bad := `{"job_id":"job_bad","topic":"tool.email.send","attempts":"four","created_at":"2026-11-20T09:00:00Z"}`
	var mu sync.Mutex
	items := []string{ok("job_1"), ok("job_2"), bad}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, `{"items":[%s],"next_cursor":null}`, strings.Join(items, ","))
	}))
	t.Cleanup(srv.Close)
	src, err := source.Parse("cordum:" + srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(2), src)
	mu.Lock()
	items = []string{bad} // job_1 and job_2 left the DLQ
	mu.Unlock()
	b.run(b.reconciler(2), src)

	var quarantined []string
	if err := b.store.Entries(context.Background(), func(er *store.EntryRecord) error {
		if er.Status == store.StatusQuarantined {
			quarantined = append(quarantined, er.Entry.Ref())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(quarantined) != 1 || quarantined[0] != "cordum:job_bad" {
		t.Fatalf("quarantined %v, want [cordum:job_bad] once", quarantined)
	}

	// Fixed at the source (or readable by a newer replayctl): the same
	// entry, its parse_error quarantine lifted and decided afresh.
	mu.Lock()
	items = []string{`{"job_id":"job_bad","topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason_code":"pool_overloaded","attempts":4,"created_at":"2026-11-20T09:00:00Z"}`}
	mu.Unlock()
	b.run(b.reconciler(2), src)
	if er := b.entry("cordum:job_bad"); er.Hold != "" || er.Status == store.StatusQuarantined || er.Entry.Undecodable() {
		t.Fatalf("decoded job_bad: %s hold %q %q", er.Status, er.Hold, er.Reason)
	}
}

// TestProdigyHalfWrittenItemSupersededOnceItDecodes: Prodigy writes an item
// in place, not atomically (iepathos/prodigy src/cook/execution/dlq.rs:520-532
// at 1e38e57, DLQStorage::persist: tokio's fs::write truncates
// JOB/items/ITEM.json, dlq.rs:513-517, then writes it), so a run can read a
// cut-off item. It was quarantined named by its path; the next run read
// the item whole as prodigy:JOB/ITEM, a second entry, and the path-named
// quarantine stayed for good. The cut-off read is now named JOB/ITEM too,
// and once the item decodes its quarantine is lifted (audited) and it is
// decided afresh: one entry, no quarantine left.
func TestProdigyHalfWrittenItemSupersededOnceItDecodes(t *testing.T) {
	b := newBundle(t, baseRules)
	const job = "mapreduce-1700000001"
	items := filepath.Join(b.dir, "dlq", "repo", job, "mapreduce", "dlq", job, "items")
	if err := os.MkdirAll(items, 0o755); err != nil {
		t.Fatal(err)
	}
	whole := `{"item_id":"item-011","item_data":{"file":"src/lib.rs"},"first_attempt":"2026-11-05T10:00:00Z","last_attempt":"2026-11-05T10:00:00Z","failure_count":1,"failure_history":[{"attempt_number":1,"timestamp":"2026-11-05T10:00:00Z","error_type":"Timeout","error_message":"Agent execution timed out","stack_trace":null,"agent_id":"agent-1","step_failed":"claude","duration_ms":600000}],"error_signature":"Timeout::Agent execution timed out","worktree_artifacts":null,"reprocess_eligible":true,"manual_review_required":false}`
	path := filepath.Join(items, "item-011.json")
	// Caught mid-write: the first part of the file.
	if err := os.WriteFile(path, []byte(whole[:len(whole)/2]), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.Parse("prodigy:" + filepath.Join(b.dir, "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	ref := "prodigy:" + job + "/item-011"
	b.run(b.reconciler(2), src)
	if er := b.entry(ref); er.Status != store.StatusQuarantined || !er.Entry.Undecodable() {
		t.Fatalf("half-written item: %s %q", er.Status, er.Reason)
	}
	// The write ends; the next run reads the item whole.
	if err := os.WriteFile(path, []byte(whole), 0o644); err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(2), src)

	var quarantined, refs []string
	if err := b.store.Entries(context.Background(), func(er *store.EntryRecord) error {
		refs = append(refs, er.Entry.Ref())
		if er.Status == store.StatusQuarantined || er.Hold != "" {
			quarantined = append(quarantined, er.Entry.Ref()+" "+er.Status)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(quarantined) != 0 || len(refs) != 1 {
		t.Fatalf("entries %v, quarantined or held %v: want %s alone, not held", refs, quarantined, ref)
	}
	if er := b.entry(ref); er.Entry.Undecodable() || er.Status != store.StatusReplayed {
		t.Fatalf("decoded item: %s %q", er.Status, er.Reason)
	}
	lifted := false
	if err := audit.Each(context.Background(), b.store, audit.Query{}, func(r audit.Record) error {
		if r.Kind == audit.KindDecision && r.EntryRef == ref && strings.Contains(r.Reason, "decodes now") {
			lifted = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !lifted {
		t.Error("no audited decision says the quarantine was lifted")
	}
}
