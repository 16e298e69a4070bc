package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// A replay lineage links an entry that comes back after a replay to the
// entry it came from (entry.Entry.Lineage, Ancestors), so that max_replays
// counts across a system's retry chain: a job retried through its
// system's DLQ comes back as a new job or record (each connector's
// lineage.go says how it is recognised); counted per key, each came
// back with a fresh budget and a job that kept failing was replayed on
// every run. The count is read from the ledger records of the lineage's
// members (durable on both stores); the lineage record holds the members
// whose ids do not say they belong and the last release.

// joinLineage records e as a member of its lineage (once).
func joinLineage(tx store.Tx, e *entry.Entry) error {
	root := e.LineageOf()
	if root == "" {
		return nil
	}
	l, err := tx.Lineage(root)
	if err != nil {
		return err
	}
	if l == nil {
		l = &store.Lineage{Root: root}
	}
	if !l.Join(e.Ref()) {
		return nil
	}
	return tx.PutLineage(l)
}

// lineageRefs are the refs of e's lineage other than e: the ancestors its
// source names, the root when it names an entry, then the members the store
// saw, each once (a ref no entry has is skipped by the readers).
func lineageRefs(l *store.Lineage, e *entry.Entry) []string {
	self := e.Ref()
	var refs []string
	add := func(ref string) {
		if ref != self && !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	for _, id := range e.Ancestors {
		add((&entry.Entry{Source: e.Source, Scope: e.Scope, ID: id}).Ref())
	}
	// A replay of an entry without a lineage is stamped with its ref
	// (connector/webhook setIDHeaders): that entry is the lineage's first member.
	add(e.LineageOf())
	if l != nil {
		for _, m := range l.Members {
			add(m)
		}
	}
	return refs
}

// withLineage fills view's lineage count from tx: the budgets of the
// lineage's other members plus the key's own, less what a person released.
func withLineage(tx store.Tx, e *entry.Entry, view triage.LedgerView) (triage.LedgerView, error) {
	root := e.LineageOf()
	if root == "" {
		return view, nil
	}
	l, err := tx.Lineage(root)
	if err != nil {
		return view, err
	}
	refs := lineageRefs(l, e)
	if len(refs) == 0 && (l == nil || l.Released == 0) {
		view.Lineage, view.LineageReplays = root, view.Replays
		return view, nil
	}
	used := view.Replays
	for _, ref := range refs {
		er, err := tx.Entry(ref)
		if err != nil {
			return view, err
		}
		if er == nil || er.Entry.IdempotencyKey == "" || er.Entry.IdempotencyKey == e.IdempotencyKey {
			continue
		}
		rec, err := tx.Ledger(er.Entry.IdempotencyKey)
		if err != nil {
			return view, err
		}
		used += rec.Budget()
	}
	if l != nil {
		used -= l.Released
	}
	view.Lineage, view.LineageReplays = root, max(used, 0)
	return view, nil
}

// lineageView is withLineage in a read transaction of its own.
func lineageView(ctx context.Context, s store.Store, e *entry.Entry, view triage.LedgerView) (triage.LedgerView, error) {
	if e.LineageOf() == "" {
		return view, nil
	}
	err := s.View(ctx, func(tx store.Tx) error {
		var err error
		view, err = withLineage(tx, e, view)
		return err
	})
	return view, err
}

// LineageLink is one member of a lineage as `dlq show` and `audit explain`
// list it.
type LineageLink struct {
	Ref     string `json:"ref"`
	Status  string `json:"status,omitempty"`
	Replays int    `json:"replays"`
	// Seen is false for an ancestor the source names that replayctl never
	// read (retried by someone else before it was ingested).
	Seen bool `json:"seen"`
}

// LineageChain is an entry's lineage: its members oldest first (the entry
// itself included) and the count max_replays is held against.
type LineageChain struct {
	Root    string        `json:"root"`
	Members []LineageLink `json:"members"`
	Used    int           `json:"used"`
	// Released is the count at the last release, with who and why.
	Released      int    `json:"released,omitempty"`
	ReleasedBy    string `json:"released_by,omitempty"`
	ReleaseReason string `json:"release_reason,omitempty"`
}

// Lineage returns the lineage of a stored entry, nil when it has none.
func Lineage(ctx context.Context, s store.Store, er *store.EntryRecord) (*LineageChain, error) {
	e := &er.Entry
	root := e.LineageOf()
	if root == "" {
		return nil, nil
	}
	var out *LineageChain
	err := s.View(ctx, func(tx store.Tx) error {
		l, err := tx.Lineage(root)
		if err != nil {
			return err
		}
		own, err := tx.Ledger(e.IdempotencyKey)
		if err != nil {
			return err
		}
		view, err := withLineage(tx, e, own.View())
		if err != nil {
			return err
		}
		out = &LineageChain{Root: root, Used: view.Used()}
		if l != nil {
			out.Released, out.ReleasedBy, out.ReleaseReason = l.Released, l.ReleasedBy, l.ReleaseReason
		}
		refs := lineageRefs(l, e)
		// Ancestors are nearest first: the chain reads oldest first.
		slices.Reverse(refs[:min(len(e.Ancestors), len(refs))])
		for _, ref := range append(refs, e.Ref()) {
			link := LineageLink{Ref: ref}
			m, err := tx.Entry(ref)
			if err != nil {
				return err
			}
			if m == nil && ref != e.Ref() && !slices.ContainsFunc(e.Ancestors, func(id string) bool {
				return (&entry.Entry{Source: e.Source, Scope: e.Scope, ID: id}).Ref() == ref
			}) {
				continue // a lineage name, not an entry
			}
			if m != nil {
				link.Seen, link.Status = true, m.Status
				rec, err := tx.Ledger(m.Entry.IdempotencyKey)
				if err != nil {
					return err
				}
				link.Replays = rec.Budget()
			}
			out.Members = append(out.Members, link)
		}
		return nil
	})
	return out, err
}

// String shows a chain on one line: "a (replayed, 1) -> a-retry-1 (manual_review, 0)".
func (c *LineageChain) String() string {
	parts := make([]string, len(c.Members))
	for i, m := range c.Members {
		status := m.Status
		if !m.Seen {
			status = "not seen"
		}
		parts[i] = fmt.Sprintf("%s (%s, %d)", m.Ref, status, m.Replays)
	}
	return strings.Join(parts, " -> ")
}

// ReleaseLineage releases the replay budget of an entry's lineage: from now
// on max_replays counts its replays from zero. The release is audited with
// the person's reason; the entry itself is re-armed as `dlq release` would
// (if it waits in manual review) so the next reconcile decides it afresh.
func ReleaseLineage(ctx context.Context, s Inventory, id, actor, reason string, now time.Time) (*LineageChain, error) {
	if strings.TrimSpace(reason) == "" {
		return nil, fmt.Errorf("%w: a reason is required", ErrState)
	}
	found, err := Find(ctx, s, id)
	if err != nil {
		return nil, err
	}
	root := found.Entry.LineageOf()
	if root == "" {
		return nil, fmt.Errorf("%w: %s belongs to no replay lineage", ErrState, found.Entry.Ref())
	}
	err = s.Update(ctx, func(tx store.Tx) error {
		er, err := tx.Entry(found.Entry.Ref())
		if err != nil {
			return err
		}
		if er == nil {
			return fmt.Errorf("entry %s: %w", found.Entry.Ref(), ErrNotFound)
		}
		own, err := tx.Ledger(er.Entry.IdempotencyKey)
		if err != nil {
			return err
		}
		l, err := tx.Lineage(root)
		if err != nil {
			return err
		}
		if l == nil {
			l = &store.Lineage{Root: root}
		}
		before := l.Released
		view, err := withLineage(tx, &er.Entry, own.View())
		if err != nil {
			return err
		}
		// Released is an absolute count: the lineage's replays so far.
		l.Released = before + view.LineageReplays
		l.Join(er.Entry.Ref())
		l.ReleasedBy, l.ReleasedAt, l.ReleaseReason = actor, now, reason
		if err := tx.PutLineage(l); err != nil {
			return err
		}
		detail, err := json.Marshal(map[string]any{"lineage": root, "replays_released": view.LineageReplays,
			"released_total": l.Released})
		if err != nil {
			return err
		}
		sealed, err := tx.Append(&audit.Record{Kind: audit.KindRelease, Actor: actor, EntryRef: er.Entry.Ref(),
			EntryID: er.Entry.ID, Source: er.Entry.Source, Key: er.Entry.IdempotencyKey, Outcome: "lineage_released",
			Reason: fmt.Sprintf("%s (lineage %s: max_replays counts again from 0, after %d replays)", reason, root, view.LineageReplays),
			Detail: detail})
		if err != nil {
			return err
		}
		er.LastDecision = sealed.Seq
		if er.Hold == "" && er.Status == store.StatusManualReview {
			er.Status, er.Reason, er.Evidence = store.StatusPending, "lineage released: "+reason, ""
		}
		return tx.PutEntry(er)
	})
	if err != nil {
		return nil, err
	}
	found, err = Find(ctx, s, found.Entry.Ref())
	if err != nil {
		return nil, err
	}
	return Lineage(ctx, s, found)
}
