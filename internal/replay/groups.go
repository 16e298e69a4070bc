package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// GroupStore is what the failure groups need of the store.
type GroupStore interface {
	store.Store
	store.Grouped
}

// Groups lists failure groups and changes their lifecycle: open,
// acknowledged (someone is on it), held (every entry of the group waits,
// until a time or a release), resolved. Every change is one audit record,
// written in the transaction that writes the group's state.
type Groups struct {
	Store GroupStore
	Clock Clock
	Actor string
}

// ErrGroupState: a lifecycle change that does not apply (release of a
// group that is not held, a hold that ends in the past).
var ErrGroupState = errors.New("group state")

// groupChange is the detail of a lifecycle audit record.
type groupChange struct {
	Group string    `json:"group"`
	From  string    `json:"from"`
	To    string    `json:"to"`
	Until time.Time `json:"until,omitzero"`
	// Expired: the hold ended by itself (its until passed), not by a person.
	Expired bool `json:"expired,omitempty"`
}

func (g *Groups) now() time.Time {
	if g.Clock == nil {
		return time.Now().UTC()
	}
	return g.Clock.Now().UTC()
}

// List returns the first limit groups (0: all), largest open count first.
func (g *Groups) List(ctx context.Context, limit int) ([]store.GroupSummary, error) {
	return g.Store.Groups(ctx, g.now(), limit)
}

// Show returns one group.
func (g *Groups) Show(ctx context.Context, id string) (*store.GroupSummary, error) {
	gs, err := g.Store.Group(ctx, id, g.now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: group %s (groups list shows the ids)", store.ErrNotFound, id)
	}
	return gs, err
}

// Ack marks a group acknowledged with a note: someone is on it.
func (g *Groups) Ack(ctx context.Context, id, note string) (*store.GroupState, error) {
	if strings.TrimSpace(note) == "" {
		return nil, fmt.Errorf("%w: an acknowledgement needs a note (--note: who is on it, what is known)", store.ErrBadGroup)
	}
	return g.change(ctx, id, store.GroupState{State: store.GroupAcknowledged, Note: note}, nil)
}

// Hold holds every current and future entry of the group until until
// (zero: until released), for reason.
func (g *Groups) Hold(ctx context.Context, id, reason string, until time.Time) (*store.GroupState, error) {
	if strings.TrimSpace(reason) == "" {
		return nil, fmt.Errorf("%w: a hold needs a reason (--reason)", store.ErrBadGroup)
	}
	if !until.IsZero() && !until.After(g.now()) {
		return nil, fmt.Errorf("%w: --until %s is not in the future", store.ErrBadGroup, until.UTC().Format(time.RFC3339))
	}
	return g.change(ctx, id, store.GroupState{State: store.GroupHeld, Reason: reason, Until: until.UTC()}, nil)
}

// Release ends a hold: the group's entries are decided afresh on the next
// reconcile.
func (g *Groups) Release(ctx context.Context, id, reason string) (*store.GroupState, error) {
	return g.change(ctx, id, store.GroupState{State: store.GroupOpen, Reason: reason}, func(cur *store.GroupState) error {
		if cur == nil || cur.State != store.GroupHeld {
			return fmt.Errorf("%w: group %s is not held", ErrGroupState, id)
		}
		return nil
	})
}

// Resolve marks a group resolved (dlq resolve --group resolves its
// entries first).
func (g *Groups) Resolve(ctx context.Context, id, reason string) (*store.GroupState, error) {
	return g.change(ctx, id, store.GroupState{State: store.GroupResolved, Reason: reason}, nil)
}

// change writes the group's new state with its audit record, in one
// transaction. check, when set, vets the current state.
func (g *Groups) change(ctx context.Context, id string, next store.GroupState, check func(*store.GroupState) error) (*store.GroupState, error) {
	if _, err := g.Show(ctx, id); err != nil {
		return nil, err
	}
	actor := g.Actor
	if actor == "" {
		actor = "replayctl"
	}
	next.ID, next.By, next.At = id, actor, g.now()
	err := g.Store.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.GroupState(id)
		if err != nil {
			return err
		}
		if check != nil {
			if err := check(cur); err != nil {
				return err
			}
		}
		from := store.GroupOpen
		if cur != nil {
			from = cur.State
		}
		seq, err := appendGroupChange(tx, actor, &next, groupChange{Group: id, From: from, To: next.State, Until: next.Until})
		if err != nil {
			return err
		}
		next.AuditSeq = seq
		return tx.PutGroupState(&next)
	})
	if err != nil {
		return nil, err
	}
	return &next, nil
}

func appendGroupChange(tx store.Tx, actor string, st *store.GroupState, c groupChange) (uint64, error) {
	detail, err := json.Marshal(c)
	if err != nil {
		return 0, err
	}
	reason := st.Reason
	if st.Note != "" {
		reason = st.Note
	}
	sealed, err := tx.Append(&audit.Record{Actor: actor, Kind: audit.KindGroup, Outcome: st.State, Reason: reason, Detail: detail})
	return sealed.Seq, err
}

// ExpiredHold is a hold that ended by itself.
type ExpiredHold struct {
	Group  string    `json:"group"`
	Reason string    `json:"reason"`
	Until  time.Time `json:"until"`
	Audit  uint64    `json:"audit_seq"`
}

// Holds returns the holds in force at now, for the decision, and opens
// the groups whose hold expired, each with an audit record (returned, so
// the caller can say so loudly).
func (g *Groups) Holds(ctx context.Context) (triage.Holds, []ExpiredHold, error) {
	now := g.now()
	holds := triage.Holds{}
	var stale []string
	err := g.Store.GroupStates(ctx, func(st *store.GroupState) error {
		switch {
		case st.HoldActive(now):
			holds[st.ID] = triage.GroupHold{Group: st.ID, Reason: st.Reason, Until: st.Until, By: st.By}
		case st.State == store.GroupHeld:
			stale = append(stale, st.ID)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var expired []ExpiredHold
	for _, id := range stale {
		err := g.Store.Update(ctx, func(tx store.Tx) error {
			cur, err := tx.GroupState(id)
			if err != nil || cur == nil || cur.State != store.GroupHeld || cur.HoldActive(now) {
				return err // another process expired or renewed it meanwhile
			}
			next := store.GroupState{ID: id, State: store.GroupOpen, Reason: "hold expired: " + cur.Reason, By: "replayctl", At: now}
			seq, err := appendGroupChange(tx, "replayctl", &next, groupChange{Group: id, From: store.GroupHeld, To: store.GroupOpen, Until: cur.Until, Expired: true})
			if err != nil {
				return err
			}
			next.AuditSeq = seq
			expired = append(expired, ExpiredHold{Group: id, Reason: cur.Reason, Until: cur.Until, Audit: seq})
			return tx.PutGroupState(&next)
		})
		if err != nil {
			return nil, expired, fmt.Errorf("expire the hold of group %s: %w", id, err)
		}
	}
	return holds, expired, nil
}

// useHolds makes the run decide with the groups' holds (a copy of the
// engine: a serve shares its engine between runs). Without a store there
// are none. Expired holds are opened and reported to OnHoldExpired and
// in rep (a run's report; nil elsewhere).
func (r *Reconciler) useHolds(ctx context.Context, rep *Report) error {
	if r.Engine == nil || r.Store == nil {
		return nil
	}
	holds, expired, err := (&Groups{Store: r.Store, Clock: r.Clock, Actor: r.Actor}).Holds(ctx)
	for _, x := range expired {
		if rep != nil {
			rep.HoldsExpired = append(rep.HoldsExpired, x)
		}
		if r.OnHoldExpired != nil {
			r.OnHoldExpired(x)
		}
	}
	if err != nil {
		return err
	}
	r.Engine = r.Engine.WithHolds(holds)
	return nil
}

// resolveGroups marks the filter's groups resolved once a resolve of
// their entries ran to the end (dlq resolve --group G).
func (b *Bulk) resolveGroups(ctx context.Context, f BulkFilter, rep *BulkReport, reason string) error {
	if b.Reconciler.Store == nil || len(f.Groups) == 0 || rep.Stopped != "" {
		return nil
	}
	g := &Groups{Store: b.Reconciler.Store, Clock: b.Reconciler.Clock, Actor: b.Reconciler.Actor}
	for _, id := range f.Groups {
		if _, err := g.Resolve(ctx, id, reason); err != nil {
			return fmt.Errorf("resolve group %s: %w", id, err)
		}
	}
	return nil
}
