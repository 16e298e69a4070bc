package storetest

import (
	"context"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// chainSucceeded: the runner's check (replay.chainAgrees) reads the
// chain's word on a key inside its transaction.
func chainSucceeded(t *testing.T, s store.Backend) {
	outcome := func(ref, key, after string) *audit.Record {
		return &audit.Record{Actor: "ops-bot", Kind: audit.KindOutcome, EntryRef: ref, Key: key, LedgerBefore: "dispatching", LedgerAfter: after, Outcome: after}
	}
	ctx := context.Background()
	if err := s.Update(ctx, func(tx store.Tx) error {
		for _, r := range []*audit.Record{outcome("jsonl:a", "ka", "failed"), outcome("jsonl:a", "ka", "succeeded"), outcome("jsonl:b", "kb", "failed")} {
			if _, err := tx.Append(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		cr := tx.(interface {
			ChainSucceeded(ref, key string) (uint64, error)
		})
		for _, c := range []struct {
			ref, key string
			want     uint64
		}{{"jsonl:a", "ka", 2}, {"jsonl:b", "kb", 0}, {"jsonl:a", "other", 0}} {
			got, err := cr.ChainSucceeded(c.ref, c.key)
			if err != nil || got != c.want {
				t.Errorf("ChainSucceeded(%s, %s) = %d %v, want %d", c.ref, c.key, got, err, c.want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
