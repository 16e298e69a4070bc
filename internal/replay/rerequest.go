package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Rerequest asks again, now, for an approval whose request expired before
// anyone decided it (reconcile also does so at its next run): a new
// request on the same evidence, under a new id, open for ttl. A pending,
// decided or stale request is refused with ErrState (a stale one is
// replaced by reconcile on the new evidence).
func Rerequest(ctx context.Context, s store.Store, id, actor string, now time.Time, ttl time.Duration) (*store.Approval, error) {
	if ttl <= 0 {
		ttl = DefaultApprovalTTL
	}
	var out *store.Approval
	err := s.Update(ctx, func(tx store.Tx) error {
		a, err := tx.Approval(id)
		if err != nil {
			return err
		}
		if a == nil {
			return fmt.Errorf("approval %s: %w", id, ErrNotFound)
		}
		expired := a.State == store.ApprovalExpired ||
			(a.State == store.ApprovalPending && !a.ExpiresAt.IsZero() && now.After(a.ExpiresAt))
		if !expired {
			return fmt.Errorf("%w: approval %s is %s, not expired", ErrState, id, a.State)
		}
		er, err := tx.Entry(a.EntryRef)
		if err != nil {
			return err
		}
		if er == nil {
			return fmt.Errorf("entry %s: %w", a.EntryRef, ErrNotFound)
		}
		if er.ApprovalID != id {
			return fmt.Errorf("%w: approval %s was already replaced by %s", ErrState, id, er.ApprovalID)
		}
		if a.State == store.ApprovalPending {
			a.State, a.DecidedAt, a.Reason = store.ApprovalExpired, now, "expired before a decision: re-requested by "+actor
			if err := tx.PutApproval(a); err != nil {
				return err
			}
		}
		n := *a
		n.ID = store.ApprovalID(a.EntryRef, a.Evidence+"\x00"+now.Format(time.RFC3339Nano))
		// The original requester stays the requester (four-eyes holds
		// across the re-request); the one who asked again is kept too.
		n.State, n.RequestedAt, n.ExpiresAt = store.ApprovalPending, now, now.Add(ttl)
		n.RerequestedBy = append(slices.Clone(a.RerequestedBy), actor)
		n.DecidedBy, n.DecidedAt, n.Reason, n.Used = "", time.Time{}, "", false
		if err := tx.PutApproval(&n); err != nil {
			return err
		}
		er.ApprovalID, er.Status = n.ID, store.StatusAwaitingApproval
		if err := tx.PutEntry(er); err != nil {
			return err
		}
		detail, _ := json.Marshal(map[string]string{"approval_id": n.ID, "replaces": id, "approver_group": n.ApproverGroup})
		if _, err := tx.Append(&audit.Record{Actor: actor, Kind: audit.KindApproval, EntryRef: n.EntryRef, EntryID: n.EntryID,
			Source: n.Source, Key: n.Key, Action: triage.RequireApproval, Outcome: "requested",
			Reason: "expired request " + id + " asked again", PolicySnapshot: n.Decision.PolicySnapshot, Detail: detail}); err != nil {
			return err
		}
		out = &n
		return nil
	})
	return out, err
}

// RerequestStale asks again for a request whose evidence changed since it
// was raised: the entry is decided now, on what is stored, and while that
// decision still asks for an approval it is recorded with a new request
// on the current evidence, in one transaction. It never dispatches and
// never probes: asking again is an approver's act, and sending is an
// operator's (Replay now, a run). A decision that no longer asks for an
// approval, or an entry held, replayed or already asked again, is refused
// with ErrState and nothing is written. It returns the new request.
func (r *Reconciler) RerequestStale(ctx context.Context, id string) (*store.Approval, error) {
	r.defaults()
	var out *store.Approval
	err := r.Store.Update(ctx, func(tx store.Tx) error {
		a, err := tx.Approval(id)
		if err != nil {
			return err
		}
		if a == nil {
			return fmt.Errorf("approval %s: %w", id, ErrNotFound)
		}
		if a.State != store.ApprovalStale {
			return fmt.Errorf("%w: approval %s is %s, not stale", ErrState, id, a.State)
		}
		er, err := tx.Entry(a.EntryRef)
		if err != nil {
			return err
		}
		switch {
		case er == nil:
			return fmt.Errorf("entry %s: %w", a.EntryRef, ErrNotFound)
		case er.ApprovalID != id:
			return fmt.Errorf("%w: approval %s was already replaced by %s", ErrState, id, orNone(er.ApprovalID))
		case er.Hold != "":
			return fmt.Errorf("%w: %s is %s (held: %s); release it first", ErrState, a.EntryRef, er.Status, er.Hold)
		case er.Status == store.StatusReplayed || er.Status == store.StatusReplaying:
			return fmt.Errorf("%w: %s is %s: nothing to ask for", ErrState, a.EntryRef, er.Status)
		}
		// Decided inside the transaction, on the ledger record it reads, so
		// the decision recorded is the one checked (Planner.DecideStored's
		// rule for a stored probe result, without making a new probe).
		lr, err := tx.Ledger(er.Entry.IdempotencyKey)
		if err != nil {
			return err
		}
		view, err := withLineage(tx, &er.Entry, lr.View())
		if err != nil {
			return err
		}
		d := r.Engine.Decide(ctx, &er.Entry, view)
		if d.NeedsProbe() && er.Probe != "" {
			view.Probe = er.Probe
			d = r.Engine.Decide(ctx, &er.Entry, view)
		}
		if d.Action != triage.RequireApproval {
			return fmt.Errorf("%w: %s's current decision is %s, not an approval: nothing was asked or sent; the next reconcile acts on it", ErrState, a.EntryRef, d.Action)
		}
		res := EntryResult{Ref: er.Entry.Ref(), Decision: d, Final: d.Action}
		if err := r.recordTx(&er.Entry, &res, nil)(tx); err != nil {
			return err
		}
		after, err := tx.Entry(a.EntryRef)
		if err != nil {
			return err
		}
		// requestApproval replaces a stale request, also when the evidence
		// is back to the one it was asked on, so the entry is on
		// another request now; if it is not, nothing was asked, and the
		// transaction must not commit as if it had been.
		if after == nil || after.ApprovalID == id || after.ApprovalID == "" {
			return fmt.Errorf("%w: %s is still on approval %s: no new request was opened", ErrState, a.EntryRef, id)
		}
		if out, err = tx.Approval(after.ApprovalID); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
