package replay

import (
	"context"

	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

const ingestBatch = 500

// runShared is a run on a store shared by many workers: one worker (the
// ingest lead) reads the sources into the store while every worker,
// itself included, claims leased entries continuously; each entry is
// handled under its claim's fencing token, so a worker that lost its
// lease can neither record nor dispatch.
func (r *Reconciler) runShared(ctx context.Context, srcs []source.Source, sh store.Shared, rep *Report) error {
	since, err := sh.Now(ctx)
	if err != nil {
		return err
	}
	idx := &sourceIndex{srcs: srcs, seen: map[string]source.Source{}}
	done, lead, err := sh.LeadIngest(ctx, since)
	if err != nil {
		return err
	}
	var ingestErr error
	ingested := make(chan struct{})
	if lead {
		go func() {
			defer close(ingested)
			var n int
			n, ingestErr = r.ingestShared(ctx, srcs, sh, since, idx)
			done(ingestErr == nil)
			rep.Ingested = n
		}()
	} else {
		close(ingested)
	}
	err = r.drainShared(ctx, sh, since, idx, rep)
	<-ingested
	if ingestErr != nil {
		return ingestErr
	}
	if err != nil {
		return err
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
