package replay

import (
	"fmt"

	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
)

// chainAgrees refuses to dispatch a key whose ledger contradicts the audit
// chain: the ledger says it was sent before and is not succeeded, the
// chain says it succeeded. An edited ledger (succeeded flipped back to
// decided) made the next reconcile send every such key again (issue 29).
// Only keys already dispatched are looked up: a first dispatch costs
// nothing. The error is a ledger conflict: the entry goes to a person.
func chainAgrees(tx store.Tx, ref string, cur *idempotency.Record) error {
	if cur == nil || cur.Replays == 0 || cur.State == idempotency.Succeeded {
		return nil
	}
	seq, err := tx.ChainSucceeded(ref, cur.Key)
	if err != nil || seq == 0 {
		return err
	}
	return fmt.Errorf("%w: the ledger says key %s is %s, but audit record %d says its replay succeeded: the ledger was edited; not sending it again (run audit verify)",
		idempotency.ErrConflict, cur.Key, cur.State, seq)
}
