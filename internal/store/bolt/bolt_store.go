package bolt

import (
	"context"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// LedgerView reads the ledger for triage (replay.LedgerReader).
func (s *Bolt) LedgerView(ctx context.Context, key string) (triage.LedgerView, error) {
	return store.LedgerView(ctx, s, key)
}
