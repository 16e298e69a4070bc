package replay

import (
	"testing"

	"github.com/replayctl/replayctl/internal/store"
)

// A person resolves an entry after its window read it ahead: the run must
// not write the decision it made on the older read over the resolve (the
// entry would stay "quarantined" with hold "resolved" and count as open).
// Found in review of the read-ahead windows.
func TestReadAheadResolveMeanwhileStands(t *testing.T) {
	b := newBundle(t, baseRules)
	perm := map[string]any{"id": "p1", "topic": "tool.jira.create", "reason_code": "schema_invalid", "idempotency_key": "p1"}
	b.run(b.reconciler(1), b.jsonl("first.jsonl", perm))
	if er := b.entry("jsonl:p1"); er.Status == store.StatusResolved {
		t.Fatalf("after run 1, p1 is %s", er.Status)
	}
	vs := &viewSignal{Bolt: b.store, nth: 2, read: make(chan struct{})}
	resolveErr := b.resolveOnceReadAhead(vs, "k2", "jsonl:p1")
	r := b.reconciler(1)
	r.Store = vs
	b.run(r, b.jsonl("second.jsonl", transient("e2", "k2"), perm))
	if err := resolveErr(); err != nil {
		t.Fatal(err)
	}
	er := b.entry("jsonl:p1")
	t.Logf("p1 after run 2: status=%s hold=%q reason=%q writeback=%q", er.Status, er.Hold, er.Reason, er.WriteBackPending)
	if er.Status != store.StatusResolved {
		t.Fatalf("p1 is %s (hold %q, reason %q): the person's resolve was overwritten by a decision read before it", er.Status, er.Hold, er.Reason)
	}
}
