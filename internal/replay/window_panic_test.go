package replay

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// One entry's write that panics inside a window's grouped transaction is
// that entry's failure: found in review, every other member of the group
// got "panic while writing a window's transaction" (up to a window of
// entries quarantined for one bug). The others now commit, each alone.
func TestWindowPanicInOnePartFailsOnlyThatPart(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "w.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := newCommitGroup(st, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, id := range []string{"a", "boom", "c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = g.submit(ctx, func(tx store.Tx) error {
				if id == "boom" {
					panic("a bug met while writing " + id)
				}
				e := entry.Entry{ID: id, Source: "jsonl"}
				e.EnsureKey()
				return tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusPending})
			})
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[2] != nil || errs[1] == nil {
		t.Fatalf("errors %v; want only the panicking part's", errs)
	}
	for _, id := range []string{"a", "c"} {
		if err := st.View(ctx, func(tx store.Tx) error {
			r, err := tx.Entry("jsonl" + ":" + id)
			if err == nil && r == nil {
				t.Errorf("%s was not committed", id)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}
