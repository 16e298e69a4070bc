package replay

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// failingStore refuses every write, as a full disk or a lost database would.
type failingStore struct{ Store }

func (failingStore) Update(context.Context, func(store.Tx) error) error {
	return errors.New("disk full")
}

// A breaker change whose audit record cannot be written is kept and
// written by the next call, in order, instead of being dropped (the write's
// error used to be discarded with `_ =`).
func TestBreakerChangeKeptWhenItsAuditFails(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b := NewBreakers(nil)
	b.changes = []BreakerChange{{Target: "t", From: "closed", To: "open"}, {Target: "t", From: "open", To: "half-open"}}

	(&Reconciler{Store: failingStore{st}, Breakers: b}).auditBreakers(ctx)
	if len(b.changes) != 2 || b.changes[0].To != "open" {
		t.Fatalf("after a failed write the changes are %+v, want both kept in order", b.changes)
	}
	(&Reconciler{Store: st, Breakers: b}).auditBreakers(ctx)
	if len(b.changes) != 0 {
		t.Fatalf("after a good write %d changes remain", len(b.changes))
	}
	var n int
	if err := st.AuditRange(ctx, 1, func(uint64, audit.Sealed, error) error {
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d audit records, want the 2 breaker changes", n)
	}
}
