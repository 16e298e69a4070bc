package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

const ingestBatch = 500

// runShared is a run on a store shared by many workers: every worker
// ingests the sources (idempotently), then they share the work by claiming
// leased entries; each entry is handled under its claim's fencing token,
// so a worker that lost its lease can neither record nor dispatch.
func (r *Reconciler) runShared(ctx context.Context, srcs []source.Source, sh store.Shared, rep *Report) error {
	since, err := sh.Now(ctx)
	if err != nil {
		return err
	}
	bySource := map[string]source.Source{}
	batch := make([]*store.EntryRecord, 0, ingestBatch)
	flush := func() error {
		n, err := sh.Ingest(ctx, batch)
		rep.Ingested += n
		batch = batch[:0]
		return err
	}
	for _, src := range srcs {
		for e, err := range src.Entries(ctx) {
			if err != nil {
				return fmt.Errorf("source %s: %w", src, err)
			}
			if _, ok := bySource[e.Source]; !ok {
				bySource[e.Source] = src
			}
			batch = append(batch, &store.EntryRecord{Entry: e, Status: store.StatusPending, FirstSeen: since, LastSeen: since})
			if len(batch) == ingestBatch {
				if err := flush(); err != nil {
					return fmt.Errorf("ingest: %w", err)
				}
			}
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}

	var mu sync.Mutex
	handled := 0
	for ctx.Err() == nil {
		want := r.MaxParallel * 2
		if r.Limit > 0 {
			if handled >= r.Limit {
				break
			}
			want = min(want, r.Limit-handled)
		}
		claims, err := sh.Claim(ctx, r.Owner, since, want, r.Lease)
		if err != nil {
			return err
		}
		if len(claims) == 0 {
			break
		}
		var wg sync.WaitGroup
		sem := make(chan struct{}, r.MaxParallel)
		var firstErr error
		for _, c := range claims {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				res, err := r.handleClaim(ctx, sh, c, bySource[c.Entry.Entry.Source])
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, store.ErrStaleFence):
					rep.StaleClaims++
				case err != nil && ctx.Err() == nil:
					// One bad entry never stops the drain: quarantine it,
					// audited, and free its claim.
					e := c.Entry.Entry
					res := r.isolate(store.WithFence(ctx, store.Fence{Ref: e.Ref(), Token: c.Token}), &e, err)
					_ = sh.Release(context.WithoutCancel(ctx), e.Ref(), c.Token)
					handled++
					rep.add(&res)
					if r.OnEntry != nil {
						r.OnEntry(res)
					}
				case err != nil:
					if firstErr == nil {
						firstErr = err
					}
				default:
					handled++
					rep.add(&res)
					if r.OnEntry != nil {
						r.OnEntry(res)
					}
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
	}
	if ctx.Err() != nil {
		rep.Interrupted = true
	}
	return nil
}

// handleClaim handles the entry under its claim (handle recovers a
// dispatch its previous owner left: that owner's lease expired, or we
// could not have claimed it) and releases the claim.
func (r *Reconciler) handleClaim(ctx context.Context, sh store.Shared, c store.Claim, src source.Source) (EntryResult, error) {
	e := c.Entry.Entry
	fctx := store.WithFence(ctx, store.Fence{Ref: e.Ref(), Token: c.Token})
	res, err := r.handleSafely(fctx, &e, src)
	if err != nil {
		return res, err
	}
	return res, sh.Release(context.WithoutCancel(ctx), e.Ref(), c.Token)
}
