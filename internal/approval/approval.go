package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// Errors of the workflow; each maps to an HTTP status in the API.
var (
	ErrNotFound = store.ErrNotFound
	// ErrForbidden: the user is not a member of the request's group (403).
	ErrForbidden = errors.New("not a member of the approver group")
	// ErrSelfApproval: four-eyes, nobody decides a request they raised (403).
	ErrSelfApproval = errors.New("four-eyes rule: you raised this request, another person must decide it")
	// ErrDecided: the request was already decided (409).
	ErrDecided = errors.New("request already decided")
	// ErrStale: the evidence changed since the request was raised (409).
	ErrStale = errors.New("evidence changed since the request was raised: the approval is stale, reconcile asks again")
	// ErrExpired: the request is past its expiry (409).
	ErrExpired = errors.New("request expired: reconcile asks again")
)

// Store is what the workflow needs of the state store.
type Store interface {
	store.Store
	Approvals(ctx context.Context, fn func(*store.Approval) error) error
}

// Service decides approval requests.
type Service struct {
	Store  Store
	Config *Config
	Now    func() time.Time
}

// View is a request as listed: with its current state (a pending request
// past expiry shows as expired) and its age.
type View struct {
	store.Approval
	Age string `json:"age"`
}

// Filter selects requests.
type Filter struct {
	Group string
	State string // pending, approved, rejected, expired, stale; "" = all
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// effectiveState is the state a reader sees at now.
func effectiveState(a *store.Approval, now time.Time) string {
	if a.State == store.ApprovalPending && !a.ExpiresAt.IsZero() && now.After(a.ExpiresAt) {
		return store.ApprovalExpired
	}
	return a.State
}

// List returns the requests matching f, oldest first.
func (s *Service) List(ctx context.Context, f Filter) ([]View, error) {
	now := s.now()
	out := []View{}
	err := s.Store.Approvals(ctx, func(a *store.Approval) error {
		v := View{Approval: *a}
		v.State = effectiveState(a, now)
		v.Age = now.Sub(a.RequestedAt).Round(time.Second).String()
		if (f.Group == "" || a.ApproverGroup == f.Group) && (f.State == "" || strings.EqualFold(v.State, f.State)) {
			out = append(out, v)
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].RequestedAt.Before(out[j].RequestedAt) })
	return out, err
}

// Decision is a person's answer to a request.
type Decision struct {
	ID      string
	Actor   string
	Approve bool
	Reason  string
	// CurrentEvidence is the evidence hash of the entry's decision made
	// now, against the current rules and policy; "" skips the check.
	CurrentEvidence string
	// Groups are approver groups Actor belongs to besides approvers.yaml
	// (a trusted sign-in proxy's groups, mapped by serve).
	Groups []string
}

// Decide records a person's approval or rejection, enforcing membership,
// four-eyes, once-only, expiry and evidence. Exactly one of two concurrent
// decisions of one request wins; the other gets ErrDecided.
func (s *Service) Decide(ctx context.Context, d Decision) (*store.Approval, error) {
	if !d.Approve && strings.TrimSpace(d.Reason) == "" {
		return nil, errors.New("a reason is required to reject (--reason TEXT)")
	}
	now := s.now()
	var (
		out     *store.Approval
		outcome error
	)
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		out, outcome = nil, nil
		a, err := tx.Approval(d.ID)
		if err != nil {
			return err
		}
		if a == nil {
			outcome = fmt.Errorf("approval %s: %w", d.ID, ErrNotFound)
			return nil
		}
		out = a
		switch {
		case !s.Config.Member(a.ApproverGroup, d.Actor) && !slices.Contains(d.Groups, a.ApproverGroup):
			outcome = fmt.Errorf("%w: %s is not in %q (%s)", ErrForbidden, d.Actor, a.ApproverGroup, s.Config.where(a.ApproverGroup))
			return nil
		case requestedBy(a, d.Actor):
			outcome = ErrSelfApproval
			return nil
		case a.State != store.ApprovalPending:
			outcome = fmt.Errorf("%w: %s is %s (by %s)", ErrDecided, a.ID, a.State, orSystem(a.DecidedBy))
			return nil
		}
		// Expiry and stale evidence are decisions too: recorded, then refused.
		state, reason := store.ApprovalApproved, d.Reason
		switch {
		case effectiveState(a, now) == store.ApprovalExpired:
			state, reason, outcome = store.ApprovalExpired, "expired before a decision", ErrExpired
		case d.CurrentEvidence != "" && d.CurrentEvidence != a.Evidence:
			state, reason, outcome = store.ApprovalStale, "evidence changed since the request", ErrStale
		case !d.Approve:
			state = store.ApprovalRejected
		}
		a.State, a.Reason, a.DecidedAt = state, reason, now
		if outcome == nil {
			a.DecidedBy = d.Actor
		}
		if err := tx.PutApproval(a); err != nil {
			return err
		}
		if err := markEntryRejected(tx, a); err != nil {
			return err
		}
		detail, _ := json.Marshal(map[string]string{"approval_id": a.ID, "approver_group": a.ApproverGroup,
			"evidence_hash": a.Evidence, "current_evidence": d.CurrentEvidence})
		_, err = tx.Append(&audit.Record{Actor: d.Actor, Kind: audit.KindApproval, EntryRef: a.EntryRef,
			EntryID: a.EntryID, Source: a.Source, Key: a.Key, Outcome: state, Reason: reason,
			PolicySnapshot: a.Decision.PolicySnapshot, Detail: detail})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, outcome
}

// SameIdentity reports whether two user names are one person: tokens,
// approvers.yaml and the sign-in proxy spell names their own way, and
// four-eyes compared them byte for byte ("Alice" and "alice" were two
// people, so one person raised and approved). Names are compared trimmed
// and case-folded.
func SameIdentity(a, b string) bool {
	return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}

// requestedBy reports whether actor raised a, or asked for it again.
func requestedBy(a *store.Approval, actor string) bool {
	if SameIdentity(a.RequestedBy, actor) {
		return true
	}
	return slices.ContainsFunc(a.RerequestedBy, func(r string) bool { return SameIdentity(r, actor) })
}

func orSystem(s string) string {
	if s == "" {
		return "replayctl"
	}
	return s
}

// markEntryRejected moves the entry of a rejected request out of
// awaiting_approval, in the transaction that records the rejection, so it
// is never stranded waiting for an approval that will not come.
func markEntryRejected(tx store.Tx, a *store.Approval) error {
	if a.State != store.ApprovalRejected {
		return nil
	}
	er, err := tx.Entry(a.EntryRef)
	if err != nil || er == nil || er.ApprovalID != a.ID {
		return err
	}
	if er.MarkRejected(a) {
		return tx.PutEntry(er)
	}
	return nil
}
