package replay

import (
	"context"
	"testing"

	"github.com/replayctl/replayctl/internal/store"
)

// TestOutcomeKeepsAWriteMadeDuringTheSend changes an entry while its
// replay is at the target (the intent committed, the outcome not yet): the
// outcome's entry record, prepared before its transaction from the entry
// as the intent stored it (Backend.PrepareEntry), must not be written over
// the change; the transaction sees other bytes stored and reads the entry
// again (Tx.PutPrepared false), so both the change and the outcome stand.
func TestOutcomeKeepsAWriteMadeDuringTheSend(t *testing.T) {
	b := newBundle(t, baseRules)
	var writeErr error
	b.sink.status = func(key string, n int) int {
		writeErr = b.store.Update(context.Background(), func(tx store.Tx) error {
			er, err := tx.Entry("jsonl:e1")
			if err != nil || er == nil {
				return err
			}
			er.Owner = "changed-during-the-send"
			return tx.PutEntry(er)
		})
		return 200
	}
	b.run(b.reconciler(1), b.jsonl("dlq.jsonl", transient("e1", "k1")))
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	er := b.entry("jsonl:e1")
	if er.Owner != "changed-during-the-send" {
		t.Errorf("owner %q: the write made during the send was overwritten by the outcome", er.Owner)
	}
	if er.Status != store.StatusReplayed {
		t.Errorf("status %q, want %q", er.Status, store.StatusReplayed)
	}
}

// TestOutcomeWithoutAWriteBetween is the same replay with nothing written
// during the send: the prepared record is what is stored, status and
// facets (the counters and index agree with a rebuild from the records).
func TestOutcomeWithoutAWriteBetween(t *testing.T) {
	b := newBundle(t, baseRules)
	b.run(b.reconciler(1), b.jsonl("dlq.jsonl", transient("e1", "k1"), transient("e2", "k2")))
	for _, ref := range []string{"jsonl:e1", "jsonl:e2"} {
		if er := b.entry(ref); er.Status != store.StatusReplayed || er.Owner != "platform-oncall" {
			t.Errorf("%s: status %q owner %q", ref, er.Status, er.Owner)
		}
	}
	c, err := b.store.Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var replayed int64
	for _, cell := range c.Cells {
		if cell.State == store.StatusReplayed {
			replayed += cell.N
		}
	}
	if replayed != 2 {
		t.Errorf("counters hold %d replayed entries, want 2: %+v", replayed, c.Cells)
	}
}
