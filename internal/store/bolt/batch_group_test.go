package bolt

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
)

// UpdateGroup is Update's group commit for a group the caller formed (a
// replay window): one transaction when every member succeeds; a member
// that fails or panics gets its own error and leaves nothing, and the
// others still commit (issue 33: one group-commit mechanism).
func TestUpdateGroupCommitsOnceAndEachFailureIsItsOwn(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "replayctl.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commits := func() int {
		var id int
		if err := s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
			t.Fatal(err)
		}
		return id
	}
	put := func(id string) func(store.Tx) error {
		return func(tx store.Tx) error {
			e := entry.Entry{ID: id, Source: "jsonl"}
			e.EnsureKey()
			return tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusPending})
		}
	}
	c0 := commits()
	if errs := s.UpdateGroup(ctx, []func(store.Tx) error{put("a"), put("b"), put("c")}); errors.Join(errs...) != nil {
		t.Fatal(errs)
	}
	if n := commits() - c0; n != 1 {
		t.Fatalf("%d commits for a group of 3, want 1", n)
	}
	refused := errors.New("refused")
	errs := s.UpdateGroup(ctx, []func(store.Tx) error{
		put("d"),
		func(tx store.Tx) error {
			if err := put("x")(tx); err != nil {
				return err
			}
			return refused
		},
		func(store.Tx) error { panic("a bug") },
		put("e"),
	})
	if errs[0] != nil || errs[3] != nil || !errors.Is(errs[1], refused) || errs[2] == nil {
		t.Fatalf("errors %v: want only the failing and the panicking member's", errs)
	}
	for id, want := range map[string]bool{"a": true, "b": true, "c": true, "d": true, "e": true, "x": false} {
		if err := s.View(ctx, func(tx store.Tx) error {
			r, err := tx.Entry("jsonl" + ":" + id)
			if (r != nil) != want {
				t.Errorf("entry %s stored: %v, want %v", id, r != nil, want)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}
