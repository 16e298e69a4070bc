package replay

import (
	"context"
	"testing"

	"github.com/replayctl/replayctl/internal/store"
)

// TestTwoJSONLSourcesSharingAnIDAreTwoEntries: two exports whose records
// share an id are two entries. They were one: one record was never
// delivered and the other vanished from view, silently. The first keeps
// its ref (single-source runs read exactly as before); the second is
// scoped by its file. A record both files hold alike is still replayed
// once: its key is the same.
func TestTwoJSONLSourcesSharingAnIDAreTwoEntries(t *testing.T) {
	b := newBundle(t, baseRules)
	rec := func(id string, n int) map[string]any {
		return map[string]any{"id": id, "topic": "orders", "reason_code": "timeout", "message": "timeout", "payload": map[string]any{"n": n}}
	}
	a := b.jsonl("a.jsonl", rec("x", 1), rec("same", 7))
	c := b.jsonl("b.jsonl", rec("x", 2), rec("same", 7))
	rep := b.run(b.reconciler(1), a, c)
	var refs []string
	statuses := map[string]string{}
	if err := b.store.Entries(context.Background(), func(er *store.EntryRecord) error {
		refs = append(refs, er.Entry.Ref())
		statuses[er.Entry.Ref()] = er.Status
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(refs) != 4 {
		t.Fatalf("entries %v (report %+v), want 4: x and same from each file", refs, rep.Summary)
	}
	if statuses["jsonl:x"] == "" || statuses["jsonl:same"] == "" {
		t.Errorf("the first file's entries lost their refs: %v", refs)
	}
	sent := map[string]int{}
	b.sink.mu.Lock()
	for _, d := range b.sink.got {
		sent[d.Body]++
	}
	b.sink.mu.Unlock()
	if sent[`{"n":1}`] != 1 || sent[`{"n":7}`] != 1 {
		t.Errorf("deliveries %v: want x from a.jsonl once and the shared record once", sent)
	}
	for ref, st := range statuses {
		if st == store.StatusPending {
			t.Errorf("%s left pending: %v", ref, statuses)
		}
	}
	// b.jsonl's x is another record under x's key: it goes to a person
	// (the ledger's payload check), never silently dropped nor sent.
	for ref, st := range statuses {
		if ref != "jsonl:x" && ref != "jsonl:same" && ref[len(ref)-2:] == "/x" &&
			st != store.StatusQuarantined && st != store.StatusManualReview {
			t.Errorf("%s is %s, want it held for a person", ref, st)
		}
	}
}
