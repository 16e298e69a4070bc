package replay

import (
	"context"
	"fmt"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// LedgerReader tells triage what the ledger knows of a key. A nil
// LedgerReader means there is no ledger yet: every key is new.
type LedgerReader interface {
	LedgerView(ctx context.Context, key string) (triage.LedgerView, error)
}

// Planner decides entries without acting on them.
type Planner struct {
	Engine *triage.Engine
	// Ledger is the store whose ledger and lineages the decisions read
	// (nil: no store yet, every key is new).
	Ledger store.Backend
}

// Plan reads every source in order and calls fn with each entry and its
// decision, in input order; the decisions are made on every core
// (triage.Pipeline). It stops at the first error from a source or from fn.
func (p *Planner) Plan(ctx context.Context, srcs []source.Source, fn func(*entry.Entry, *triage.Decision) error) error {
	return (&triage.Pipeline{Decide: p.Decide}).Run(ctx, source.All(source.Distinct(srcs)), fn)
}

// Decide decides one entry against the ledger's current view of its key.
func (p *Planner) Decide(ctx context.Context, e *entry.Entry) (triage.Decision, error) {
	var view triage.LedgerView
	if p.Ledger != nil {
		v, err := p.Ledger.LedgerView(ctx, e.IdempotencyKey)
		if err != nil {
			return triage.Decision{}, fmt.Errorf("ledger view of %s: %w", e.Ref(), err)
		}
		if view, err = lineageView(ctx, p.Ledger, e, v); err != nil {
			return triage.Decision{}, fmt.Errorf("lineage of %s: %w", e.Ref(), err)
		}
	}
	return p.Engine.Decide(ctx, e, view), nil
}

// DecideStored decides a stored entry as a run would now, including the
// last compensating read's result when the decision depends on one. The
// approve paths (CLI, API, UI) compare this evidence with the request's:
// a request raised after a probe said not_committed carries that result in
// its evidence, so recomputing without it made every such approval stale
// (issue 14).
func (p *Planner) DecideStored(ctx context.Context, er *store.EntryRecord) (triage.Decision, error) {
	d, err := p.Decide(ctx, &er.Entry)
	if err != nil || !d.NeedsProbe() || er.Probe == "" {
		return d, err
	}
	view := d.Ledger
	view.Probe = er.Probe
	return p.Engine.Decide(ctx, &er.Entry, view), nil
}
