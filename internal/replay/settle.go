package replay

import (
	"strings"

	"context"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/registry"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// settlerOf is the source's write-back (connector.SettlerOf): ok is false
// for a source that has nothing to tell its system.
func settlerOf(src source.Source) (connector.Settler, bool) { return connector.SettlerOf(src) }

// settlement is what a write-back of kind (store.WriteBackReplayed or
// store.WriteBackResolved) tells the system; reason is a resolve's reason.
func settlement(kind, reason string) connector.Settlement {
	return connector.Settlement{Replayed: kind != store.WriteBackResolved, Reason: reason}
}

// settleBatch is how many outcome_unknown entries a run reads per page.
const settleBatch = 256

// unknownToSettle lists the stored outcome_unknown entries this run did
// not see (a live source no longer lists an entry its system replayed: the
// system's own retry deletes it from the DLQ or marks it replayed)
// whose route can ask the system about the entry itself (EntryProber). The
// run handles them like any entry: the decision asks for the probe, a
// committed answer settles the key, a not-committed one opens an approval
// request; nothing is sent without one. Before issue 27 they stayed
// outcome_unknown for good.
func (r *Reconciler) unknownToSettle(ctx context.Context, seen map[string]bool) ([]work, error) {
	if r.Router == nil {
		return nil, nil
	}
	var out []work
	cursor := ""
	for {
		p, err := r.Store.Page(ctx, store.EntryFilter{States: []string{store.StatusUnknown}}, cursor, settleBatch)
		if err != nil {
			return out, err
		}
		for _, er := range p.Items {
			e := er.Entry
			if seen[e.Ref()] || er.Hold != "" || e.Undecodable() {
				continue
			}
			rt, ok := r.Router.Route(&e)
			if !ok || rt.Prober == nil {
				continue
			}
			if _, asks := rt.Prober.(EntryProber); !asks {
				continue
			}
			if e.Payload == nil {
				// Page leaves payloads out; the decision hashes the
				// payload, so read the entry whole.
				full, err := r.storedEntry(ctx, e.Ref())
				if err != nil {
					return out, err
				}
				if full == nil {
					continue
				}
				e = full.Entry
			}
			out = append(out, work{e: e})
		}
		if p.Next == "" {
			return out, nil
		}
		cursor = p.Next
	}
}

func (r *Reconciler) storedEntry(ctx context.Context, ref string) (*store.EntryRecord, error) {
	var er *store.EntryRecord
	err := r.Store.View(ctx, func(tx store.Tx) error {
		var err error
		er, err = tx.Entry(ref)
		return err
	})
	return er, err
}

// keptAfterReplay reports whether a live source still lists an entry whose
// key replayctl replayed: the system answered its own retry 200 but its
// delete of the DLQ entry failed (a gateway that only logs it, see the
// connector's package doc), so the system's own Retry button could run
// the job a second time. The entry is settled: taken out as the system
// itself does (the connector's write-back), with its audit record.
// Only an entry replayed through the system's own endpoint is meant: one
// replayed to another target owes its write-back (WriteBackPending) until
// the source takes it.
func keptAfterReplay(e *entry.Entry, src source.Source, d *triage.Decision, route Route) bool {
	if _, live := src.(interface{ NativeTarget() string }); !live {
		return false
	}
	if _, native := route.Dispatcher.(registry.Native); !native {
		return false // a generic target: the write-back is owed (WriteBackPending)
	}
	if _, ok := settlerOf(src); !ok {
		return false
	}
	return d.Action == triage.Skip && d.Ledger.State == triage.StateSucceeded && !e.State.Handled
}

// settleKept takes out an entry the source kept after its replay
// (keptAfterReplay), once. On bbolt the entry reached here because the
// source listed it. A shared store's run handles every stored entry,
// listed or not, so there the system is asked first (EntryProber): one it
// no longer holds is only marked settled, without a DELETE or a record
// saying it was taken out; an inconclusive answer leaves it to the next
// run. Before this, four PostgreSQL runs of one Cordum entry sent three
// DELETEs, each audited as "taken out of the source's DLQ".
func (r *Reconciler) settleKept(ctx context.Context, h *handling, e *entry.Entry, src source.Source, res *EntryResult, route Route) {
	if r.Store.Features().Shared {
		ep, ok := route.Prober.(EntryProber)
		if !ok {
			return // cannot tell whether the source still holds it
		}
		var pr ProbeResult
		func() {
			defer outbound(h)() // within --max-parallel
			pr, _ = ep.ProbeEntry(ctx, e)
		}()
		switch pr {
		case ProbeCommitted: // gone from the source: nothing to take out
			r.markSettled(ctx, e, res)
			return
		case ProbeInconclusive:
			return // asked again by the next run
		}
	}
	r.writeBack(ctx, h, e, src, res, store.WriteBackReplayed, "", nil)
	if res.Outcome != "write_back_failed" {
		// A failed one is owed (WriteBackPending) and retried until taken.
		r.markSettled(ctx, e, res)
	}
}

// markSettled records on the entry that the source no longer holds it.
func (r *Reconciler) markSettled(ctx context.Context, e *entry.Entry, res *EntryResult) {
	err := r.Store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		er, err := tx.Entry(e.Ref())
		if err != nil || er == nil || er.Settled {
			return err
		}
		er.Settled = true
		return tx.PutEntry(er)
	})
	if err != nil {
		res.Reason = strings.TrimSpace(res.Reason + " (settled at the source, not recorded: " + err.Error() + ")")
	}
}

// settledBy wraps a probe's commit: the system answered that it no
// longer holds the entry, so it is settled too.
func settledBy(commit func(store.Tx, *store.EntryRecord) error) func(store.Tx, *store.EntryRecord) error {
	return func(tx store.Tx, er *store.EntryRecord) error {
		er.Settled = true
		return commit(tx, er)
	}
}
