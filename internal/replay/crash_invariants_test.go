package replay

import (
	"context"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
)

// crashFigures is what checkCrashInvariants counted.
type crashFigures struct {
	recovered int
	unknown   map[string]bool
	states    map[idempotency.State]int
}

// checkCrashInvariants states, once for every crash test, what must hold
// after processes were killed and restarted: no key reached the target
// twice without an outcome_unknown record, no dispatch is left without an
// outcome, every one of the n entries is stored with a decision (and, on
// a shared store, not leased), a key that succeeded reached the target,
// and the audit chain verifies.
func checkCrashInvariants(t *testing.T, st store.Backend, delivered map[string]int, n int) crashFigures {
	t.Helper()
	ctx := context.Background()
	f := crashFigures{unknown: map[string]bool{}, states: map[idempotency.State]int{}}
	_ = audit.Each(ctx, st, audit.Query{}, func(r audit.Record) error {
		if r.Kind == audit.KindRecovery {
			f.recovered++
		}
		if r.Kind == audit.KindRecovery || r.Outcome == string(idempotency.OutcomeUnknown) {
			f.unknown[r.Key] = true
		}
		return nil
	})
	for k, c := range delivered {
		if c > 1 && !f.unknown[k] {
			t.Errorf("key %s delivered %d times with no outcome_unknown record", k, c)
		}
	}
	_ = st.LedgerRecords(ctx, func(r *idempotency.Record) error {
		f.states[r.State]++
		if r.State == idempotency.Succeeded && delivered[r.Key] == 0 {
			t.Errorf("key %s succeeded but never reached the target", r.Key)
		}
		return nil
	})
	if f.states[idempotency.Dispatching] != 0 {
		t.Errorf("%d dispatching records left without an outcome", f.states[idempotency.Dispatching])
	}
	pg, shared := st.(*postgres.Postgres)
	stored, leased := 0, 0
	_ = st.Entries(ctx, func(er *store.EntryRecord) error {
		stored++
		if er.LastDecision == 0 {
			t.Errorf("%s stored without a decision", er.Entry.Ref())
		}
		if shared {
			if owner, _, _, _ := pg.LeaseHolder(ctx, er.Entry.Ref()); owner != "" {
				leased++
			}
		}
		return nil
	})
	if stored != n || leased != 0 {
		t.Errorf("%d of %d entries stored (lost: %d), %d still leased", stored, n, n-stored, leased)
	}
	if res, err := audit.Verify(ctx, st, nil); err != nil || !res.OK() {
		t.Errorf("audit chain: %+v %v", res, err)
	}
	return f
}
