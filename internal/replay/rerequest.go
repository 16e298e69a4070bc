package replay

import (
	"context"
	"encoding/json"
	"fmt"
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
		n.State, n.RequestedBy, n.RequestedAt, n.ExpiresAt = store.ApprovalPending, actor, now, now.Add(ttl)
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
