package replay

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
)

// Sentinel errors of the entry operations; the CLI and the API map them
// to exit codes and HTTP statuses.
var (
	ErrNotFound  = store.ErrNotFound
	ErrAmbiguous = errors.New("ambiguous entry id")
	// ErrState: the entry is not in a state that allows the operation
	// (Nexora answers 409 Conflict).
	ErrState = errors.New("entry not in a state that allows this")
)

// Inventory is what entry operations need of the store: the one store
// contract (store.Backend), whose indexes every listing reads.
type Inventory interface {
	store.Backend
}

// Filter selects entries for listings (and bulk operations later).
type Filter struct {
	States  []string // statuses; empty = every status
	Classes []string
	Actions []string
	Sources []string
	// Topic is a glob as in rules.yaml ("orders.*", "tool.**"); "" = any.
	Topic string
	// Labels must all be present with these values.
	Labels map[string]string
	// Q is a case-insensitive substring of the ref, id, key, topic or message.
	Q string
	// FirstSeenBefore keeps entries first seen before it.
	FirstSeenBefore time.Time
	// LastFailedBy keeps entries whose last failure (first seen without
	// one) is at or before it: the age filter of `dlq list --older-than`,
	// the API's older_than, the console and the bulk filters alike.
	LastFailedBy time.Time
}

func (f *Filter) storeFilter() store.EntryFilter {
	return store.EntryFilter{States: f.States, Classes: f.Classes, Actions: f.Actions, Sources: f.Sources,
		Topic: f.Topic, Labels: f.Labels, Q: f.Q, FirstSeenBefore: f.FirstSeenBefore, LastFailedBy: f.LastFailedBy}
}

// Page is one page of a listing (Nexora's shape: items, page, size, plus
// total), with the cursor of the next page. Items carry no payload (a
// listing never reads one; Show has it). Total is exact when TotalExact;
// otherwise (labels, q, age, or a topic with other filters) an upper bound.
type Page struct {
	Items      []*store.EntryRecord `json:"items"`
	Page       int                  `json:"page"`
	Size       int                  `json:"size"`
	Total      int                  `json:"total"`
	TotalExact bool                 `json:"total_exact"`
	Next       string               `json:"next_cursor,omitempty"`
}

// List returns one page (0-based) of the entries matching f, in ref order.
// A page number skips that many pages through the cursor; a cursor
// (ListAfter) costs the page alone.
func List(ctx context.Context, s Inventory, f Filter, page, size int) (*Page, error) {
	if size <= 0 {
		size = 20
	}
	if page < 0 {
		page = 0
	}
	cursor := ""
	for i := 0; ; i++ {
		p, err := listIndexed(ctx, s, f, cursor, size)
		if err != nil || i == page {
			if p != nil {
				p.Page = page
			}
			return p, err
		}
		if p.Next == "" {
			p.Items, p.Page, p.Next = []*store.EntryRecord{}, page, ""
			return p, nil
		}
		cursor = p.Next
	}
}

// ListAfter returns up to size entries matching f after cursor ("" = the
// first page); Page.Next is the cursor of the following page.
func ListAfter(ctx context.Context, s Inventory, f Filter, cursor string, size int) (*Page, error) {
	if size <= 0 {
		size = 20
	}
	return listIndexed(ctx, s, f, cursor, size)
}

func listIndexed(ctx context.Context, ix Inventory, f Filter, cursor string, size int) (*Page, error) {
	ep, err := ix.Page(ctx, f.storeFilter(), cursor, size)
	if err != nil {
		return nil, err
	}
	return &Page{Items: ep.Items, Size: size, Total: int(ep.Total), TotalExact: ep.TotalExact, Next: ep.Next}, nil
}

// Find resolves what a user typed: an entry ref ("kind:id") or a bare id
// when it is unique.
func Find(ctx context.Context, s Inventory, id string) (*store.EntryRecord, error) {
	var exact *store.EntryRecord
	if err := s.View(ctx, func(tx store.Tx) error {
		r, err := tx.Entry(id)
		exact = r
		return err
	}); err != nil || exact != nil {
		return exact, err
	}
	found, err := findByID(ctx, s, id)
	switch {
	case err != nil:
		return nil, err
	case len(found) == 0:
		return nil, fmt.Errorf("entry %q: %w (run reconcile to ingest the sources, or list with `dlq list --state ALL`)", id, ErrNotFound)
	case len(found) > 1:
		refs := make([]string, len(found))
		for i, r := range found {
			refs[i] = r.Entry.Ref()
		}
		return nil, fmt.Errorf("%w %q: use one of %s", ErrAmbiguous, id, strings.Join(refs, ", "))
	}
	return found[0], nil
}

// findByID returns the entries whose source id is id, from the id index.
func findByID(ctx context.Context, s Inventory, id string) ([]*store.EntryRecord, error) {
	refs, err := s.RefsByID(ctx, id)
	if err != nil {
		return nil, err
	}
	var found []*store.EntryRecord
	err = s.View(ctx, func(tx store.Tx) error {
		for _, ref := range refs {
			r, err := tx.Entry(ref)
			if err != nil {
				return err
			}
			if r != nil {
				found = append(found, r)
			}
		}
		return nil
	})
	return found, err
}

// Detail is everything known about one entry.
type Detail struct {
	Entry     *store.EntryRecord  `json:"entry"`
	Ledger    *idempotency.Record `json:"ledger"`
	Decisions []audit.Record      `json:"history"`
	// Lineage is the entry's replay lineage (nil when it has none).
	Lineage *LineageChain `json:"lineage,omitempty"`
}

// Show gathers an entry with its ledger record and every audit record
// about it, oldest first.
func Show(ctx context.Context, s Inventory, id string) (*Detail, error) {
	er, err := Find(ctx, s, id)
	if err != nil {
		return nil, err
	}
	d := &Detail{Entry: er, Decisions: []audit.Record{}}
	if err := s.View(ctx, func(tx store.Tx) error {
		d.Ledger, err = tx.Ledger(er.Entry.IdempotencyKey)
		return err
	}); err != nil {
		return nil, err
	}
	if d.Lineage, err = Lineage(ctx, s, er); err != nil {
		return nil, err
	}
	ref := er.Entry.Ref()
	collect := func(_ uint64, sealed audit.Sealed, derr error) error {
		if derr != nil {
			return nil
		}
		rec, err := sealed.Open()
		if err == nil && (rec.EntryRef == ref || (rec.EntryRef == "" && rec.Key == er.Entry.IdempotencyKey && rec.Key != "")) {
			d.Decisions = append(d.Decisions, rec)
		}
		return nil
	}
	// The entry's own records from the per-entry audit index.
	err = s.EntryAudit(ctx, ref, er.Entry.IdempotencyKey, collect)
	return d, err
}

// Resolve marks an entry handled without replay (Nexora RESOLVED). Later
// reconciles leave it resolved.
func Resolve(ctx context.Context, s Inventory, id, actor, reason string) (*store.EntryRecord, error) {
	if strings.TrimSpace(reason) == "" {
		return nil, errors.New("a reason is required (--reason TEXT)")
	}
	return changeEntry(ctx, s, id, func(tx store.Tx, er *store.EntryRecord) (*audit.Record, error) {
		switch er.Status {
		case store.StatusReplayed, store.StatusResolved:
			return nil, fmt.Errorf("%w: %s is already %s", ErrState, er.Entry.Ref(), er.Status)
		case store.StatusReplaying:
			return nil, fmt.Errorf("%w: %s is being replayed", ErrState, er.Entry.Ref())
		}
		before := er.Status
		er.Status, er.Hold, er.Reason = store.StatusResolved, store.HoldResolved, reason
		// The source is told by the next reconcile, never before this
		// resolve is committed (a write-back that fails stays owed).
		er.WriteBackPending = store.WriteBackResolved
		// Its open approval request has nothing left to approve.
		if er.ApprovalID != "" {
			a, err := tx.Approval(er.ApprovalID)
			if err != nil {
				return nil, err
			}
			if a != nil && a.State == store.ApprovalPending {
				a.State, a.Reason = store.ApprovalStale, "entry resolved without replay: "+reason
				if err := tx.PutApproval(a); err != nil {
					return nil, err
				}
			}
		}
		return &audit.Record{Kind: audit.KindResolve, Outcome: store.StatusResolved,
			Reason: reason, Detail: statusDetail(before, er.Status)}, nil
	}, actor)
}

// Release takes an entry out of quarantine (or a definite failure), or
// re-arms one a person must look at (max_replays reached, no target): the
// next reconcile decides it afresh and may dispatch again. The ledger's
// failed state becomes decided again and the max_replays count restarts
// (audited). A key whose outcome is unknown is not re-armed: a probe or a
// person's approval decides it.
func Release(ctx context.Context, s Inventory, id, actor, reason string) (*store.EntryRecord, error) {
	return changeEntry(ctx, s, id, func(tx store.Tx, er *store.EntryRecord) (*audit.Record, error) {
		rearm := er.Hold == "" && er.Status == store.StatusManualReview
		if !Releasable(er) {
			return nil, fmt.Errorf("%w: %s is %s, not quarantined, failed, rejected or in manual review", ErrState, er.Entry.Ref(), er.Status)
		}
		rec := &audit.Record{Kind: audit.KindRelease, Outcome: store.StatusPending, Reason: reason,
			Detail: statusDetail(er.Status, store.StatusPending)}
		cur, err := tx.Ledger(er.Entry.IdempotencyKey)
		if err != nil {
			return nil, err
		}
		switch {
		case cur == nil:
		case cur.State == idempotency.Failed:
			if _, err := tx.Transition(idempotency.Transition{Key: cur.Key, From: idempotency.Failed, To: idempotency.Decided, Rearm: true}); err != nil {
				return nil, err
			}
			rec.LedgerBefore, rec.LedgerAfter = string(idempotency.Failed), string(idempotency.Decided)
		case cur.State == idempotency.Decided && cur.Budget() > 0:
			if _, err := tx.Transition(idempotency.Transition{Key: cur.Key, From: idempotency.Decided, To: idempotency.Decided, Rearm: true}); err != nil {
				return nil, err
			}
			rec.LedgerBefore, rec.LedgerAfter = string(idempotency.Decided), string(idempotency.Decided)
			rec.Reason = fmt.Sprintf("%s (re-armed: max_replays counts again from 0, after %d replays)", reason, cur.Replays)
		case rearm && cur.State != idempotency.Decided:
			return nil, fmt.Errorf("%w: %s: its key is %s, which a release cannot settle: %s", ErrState, er.Entry.Ref(), cur.State, UnknownWayOut)
		}
		er.Status, er.Hold, er.Reason, er.Evidence = store.StatusPending, "", "released: "+reason, ""
		return rec, nil
	}, actor)
}

func statusDetail(before, after string) []byte {
	return []byte(fmt.Sprintf(`{"status_before":%q,"status_after":%q}`, before, after))
}

// changeEntry applies a person's change to one entry with its audit
// record, in one transaction.
func changeEntry(ctx context.Context, s Inventory, id string, fn func(store.Tx, *store.EntryRecord) (*audit.Record, error), actor string) (*store.EntryRecord, error) {
	found, err := Find(ctx, s, id)
	if err != nil {
		return nil, err
	}
	var out *store.EntryRecord
	err = s.Update(ctx, func(tx store.Tx) error {
		er, err := tx.Entry(found.Entry.Ref())
		if err != nil {
			return err
		}
		if er == nil {
			return fmt.Errorf("entry %s: %w", found.Entry.Ref(), ErrNotFound)
		}
		rec, err := fn(tx, er)
		if err != nil {
			return err
		}
		rec.Actor, rec.EntryRef, rec.EntryID, rec.Source, rec.Key = actor, er.Entry.Ref(), er.Entry.ID, er.Entry.Source, er.Entry.IdempotencyKey
		sealed, err := tx.Append(rec)
		if err != nil {
			return err
		}
		er.LastDecision = sealed.Seq
		out = er
		return tx.PutEntry(er)
	})
	return out, err
}

// CountByStatus counts stored entries per status (reports).
func CountByStatus(ctx context.Context, s Inventory) (map[string]int, []string, error) {
	c, err := s.Counters(ctx)
	if err != nil {
		return nil, nil, err
	}
	counts := map[string]int{}
	for _, cl := range c.Cells {
		counts[cl.State] += int(cl.N)
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return counts, keys, nil
}

// Releasable reports whether Release takes the entry: quarantined, failed,
// rejected, or in manual review without a hold (re-armed). Previews ask it;
// Release asks it again inside its transaction.
func Releasable(er *store.EntryRecord) bool {
	return er.Hold == store.HoldQuarantine || er.Hold == store.HoldFailed || er.Hold == store.HoldRejected ||
		er.Hold == "" && er.Status == store.StatusManualReview
}
