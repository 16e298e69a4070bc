package replay

import (
	"context"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Facts -> decide once -> act -> record (issue 33, docs/architecture.md).
// What the runner knows of an entry before deciding is read in one
// transaction (readFacts; a window reads all of its entries' in one):
// its ledger record and lineage, its stored record and its current
// approval request. The engine then decides once on all of it (decideOn).
// A compensating read, when the decision asks for one, is one more fact
// and one more pass of the same decideOn (handleOnce).

// handling is one handling of one entry: what steers it besides the
// entry itself, passed along explicitly (the context carries only
// cancellation and deadlines).
type handling struct {
	// slot is the entry's place in its window (window.go): its commit
	// groups and its share of --max-parallel. nil: handled alone.
	slot *slot
	// basis is the read ahead (window.go, bulk.go) the entry's writes
	// rest on: guarded checks that it still holds before each.
	basis *prepared
	// lease is the entry's claim's lease on a shared store (shared.go).
	lease *claimLease
	// now: a person asked for this replay (single or bulk): it goes out
	// now, whatever retry time a run scheduled; the breaker still holds it.
	now bool
}

// readFacts reads, in tx, what the runner decides on for e. A key with a
// dispatch left without an outcome is returned as read: the caller
// recovers it first (claim.go).
func readFacts(tx store.Tx, e *entry.Entry) (*prepared, error) {
	var rec *idempotency.Record
	if e.IdempotencyKey != "" {
		var err error
		if rec, err = tx.Ledger(e.IdempotencyKey); err != nil {
			return nil, err
		}
	}
	er, err := tx.Entry(e.Ref())
	if err != nil {
		return nil, err
	}
	view, err := withLineage(tx, e, rec.View())
	if err != nil {
		return nil, err
	}
	p := &prepared{ref: e.Ref(), view: view, entry: er}
	if rec != nil {
		p.ledger = *rec
	}
	if er != nil && er.ApprovalID != "" {
		if p.approval, err = tx.Approval(er.ApprovalID); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// decideOn decides e on its facts: the ledger view and the entry's
// current approval request (nil: none). A granted approval is a fact of
// the decision like the others, so an approved entry is decided once.
// Only when a fact read turns out not to apply (the approval was of other
// evidence, or a request on this evidence is not the entry's current one)
// is it decided again, as often as it was before. payloadHash, when
// known, saves hashing the payload again.
func (r *Reconciler) decideOn(ctx context.Context, e *entry.Entry, view triage.LedgerView, a *store.Approval, payloadHash string) (triage.Decision, error) {
	granted := a != nil && a.State == store.ApprovalApproved && !a.Used
	view.Approved = granted
	d := r.decide(ctx, e, view, payloadHash)
	if granted && d.EvidenceHash != a.Evidence {
		// Approved on other evidence: it does not apply to this one.
		granted, view.Approved = false, false
		d = r.decide(ctx, e, view, d.PayloadHash)
	}
	if d.Action != triage.RequireApproval || granted || a != nil && a.Evidence == d.EvidenceHash {
		return d, nil // the request on this evidence was read: not granted
	}
	// Another request on this evidence than the entry's current one
	// (currentApprovalID): read it.
	ok, err := r.approved(ctx, e, &d)
	if err != nil || !ok {
		return d, err
	}
	view.Approved = true
	return r.decide(ctx, e, view, d.PayloadHash), nil
}

// decide is the runner's one call of the pure engine: every decision a
// run, a single or a bulk replay acts on is made here.
func (r *Reconciler) decide(ctx context.Context, e *entry.Entry, view triage.LedgerView, payloadHash string) triage.Decision {
	if r.onDecide != nil {
		r.onDecide(e.Ref())
	}
	if payloadHash == "" {
		return r.Engine.Decide(ctx, e, view)
	}
	return r.Engine.DecideWithPayloadHash(ctx, e, view, payloadHash)
}
