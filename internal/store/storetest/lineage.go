package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/store"
)

// lineages: a lineage written in one transaction is read back whole in
// the next, a failed transaction writes nothing, and an unknown root reads
// as nil, on every backend.
func lineages(t *testing.T, s store.Backend) {
	ctx := context.Background()
	root := "sys:job-1"
	at := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	if err := s.Update(ctx, func(tx store.Tx) error {
		l, err := tx.Lineage(root)
		if err != nil || l != nil {
			t.Errorf("unknown lineage: %+v, %v", l, err)
		}
		l = &store.Lineage{Root: root}
		l.Join("sys:job-1")
		l.Join("sys:job-1-retry-0a1b2c3d")
		if l.Join("sys:job-1") {
			t.Error("joining a member twice reported new")
		}
		return tx.PutLineage(l)
	}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := s.Update(ctx, func(tx store.Tx) error {
		l, err := tx.Lineage(root)
		if err != nil {
			return err
		}
		l.Released, l.ReleasedBy, l.ReleasedAt, l.ReleaseReason = 9, "someone", at, "rolled back"
		if err := tx.PutLineage(l); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failing update: %v", err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		l, err := tx.Lineage(root)
		if err != nil {
			return err
		}
		l.Released, l.ReleasedBy, l.ReleasedAt, l.ReleaseReason = 2, "ops", at, "fixed upstream"
		return tx.PutLineage(l)
	}); err != nil {
		t.Fatal(err)
	}
	var got *store.Lineage
	if err := s.View(ctx, func(tx store.Tx) error {
		var err error
		got, err = tx.Lineage(root)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got == nil || !slices.Equal(got.Members, []string{"sys:job-1", "sys:job-1-retry-0a1b2c3d"}) ||
		got.Released != 2 || got.ReleasedBy != "ops" || !got.ReleasedAt.Equal(at) || got.ReleaseReason != "fixed upstream" {
		t.Fatalf("lineage read back as %+v", got)
	}
}
