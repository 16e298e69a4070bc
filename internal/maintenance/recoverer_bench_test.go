package maintenance

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// BenchmarkRecoverSweep is one round of the recovery duty on a bbolt
// ledger of 100,000 settled keys and nothing to recover: the cost every
// interval pays (it walks the ledger; there is no index of dispatching
// keys), which sets the duty's 10-minute interval.
func BenchmarkRecoverSweep(b *testing.B) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(b.TempDir(), "replayctl.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const keys, perTx = 100_000, 10_000
	for i := 0; i < keys; i += perTx {
		if err := st.Update(ctx, func(tx store.Tx) error {
			for j := i; j < i+perTx; j++ {
				key := fmt.Sprintf("key-%07d", j)
				if _, err := tx.Transition(idempotency.Transition{Key: key, To: idempotency.Decided, EntryRef: "jsonl:" + key}); err != nil {
					return err
				}
				if _, err := tx.Transition(idempotency.Transition{Key: key, From: idempotency.Decided, To: idempotency.Succeeded}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if n, err := replay.Recover(ctx, st, "bench"); err != nil || n != 0 {
			b.Fatal(n, err)
		}
	}
}
