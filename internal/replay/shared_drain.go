package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

// idlePoll is how long a worker with nothing to claim waits while another
// worker is still ingesting.
const idlePoll = 10 * time.Millisecond

// sourceIndex finds the source an entry came from (for write-back): from
// the entries this worker ingested, else by kind, since a worker that did
// not lead the ingest never reads its sources.
type sourceIndex struct {
	srcs []source.Source
	mu   sync.Mutex
	seen map[string]source.Source
}

func (x *sourceIndex) saw(kind string, src source.Source) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.seen[kind]; !ok {
		x.seen[kind] = src
	}
}

func (x *sourceIndex) of(kind string) source.Source {
	x.mu.Lock()
	src, ok := x.seen[kind]
	x.mu.Unlock()
	if ok {
		return src
	}
	if len(x.srcs) == 1 {
		return x.srcs[0]
	}
	for _, s := range x.srcs {
		if strings.HasPrefix(s.String(), kind+":") {
			return s
		}
	}
	return nil
}

// ingestShared reads the sources into the shared store, in batches that
// other workers can claim as soon as each commits.
func (r *Reconciler) ingestShared(ctx context.Context, srcs []source.Source, sh store.Shared, since time.Time, idx *sourceIndex) (int, error) {
	ingested := 0
	batch := make([]*store.EntryRecord, 0, ingestBatch)
	flush := func() error {
		n, err := sh.Ingest(ctx, batch)
		ingested += n
		batch = batch[:0]
		if err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		return nil
	}
	for _, src := range srcs {
		for e, err := range src.Entries(ctx) {
			if err != nil {
				return ingested, fmt.Errorf("source %s: %w", src, err)
			}
			idx.saw(e.Source, src)
			batch = append(batch, &store.EntryRecord{Entry: e, Status: store.StatusPending, FirstSeen: since, LastSeen: since})
			if len(batch) == ingestBatch {
				if err := flush(); err != nil {
					return ingested, err
				}
			}
		}
	}
	return ingested, flush()
}

// drainShared claims continuously: whenever a slot of MaxParallel is free
// the worker claims as many entries as it has free slots, instead of
// waiting for a whole batch to finish (one slow target call held up every
// other slot). It stops when nothing is claimable and no worker is
// ingesting.
func (r *Reconciler) drainShared(ctx context.Context, sh store.Shared, since time.Time, idx *sourceIndex, rep *Report) error {
	var mu sync.Mutex
	var firstErr error
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	slots := make(chan struct{}, r.MaxParallel)
	for range r.MaxParallel {
		slots <- struct{}{}
	}
	var wg sync.WaitGroup
	claimed := 0
	for ctx.Err() == nil && !failed() {
		if r.Limit > 0 && claimed >= r.Limit {
			break
		}
		select {
		case <-slots:
		case <-ctx.Done():
			continue
		}
		free := 1
	take:
		for {
			select {
			case <-slots:
				free++
			default:
				break take
			}
		}
		want := free
		if r.Limit > 0 {
			want = min(want, r.Limit-claimed)
		}
		claims, err := sh.Claim(ctx, r.Owner, since, want, r.Lease)
		for range free - len(claims) {
			slots <- struct{}{}
		}
		if err != nil {
			mu.Lock()
			if firstErr == nil && ctx.Err() == nil {
				firstErr = err
			}
			mu.Unlock()
			break
		}
		claimed += len(claims)
		if len(claims) == 0 {
			busy, err := sh.Ingesting(ctx)
			if err != nil && ctx.Err() == nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				break
			}
			if !busy {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(idlePoll):
			}
			continue
		}
		for _, c := range claims {
			wg.Add(1)
			go func() {
				defer func() { slots <- struct{}{}; wg.Done() }()
				res, err := r.handleClaim(ctx, sh, c, idx.of(c.Entry.Entry.Source))
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
					rep.add(&res)
					if r.OnEntry != nil {
						r.OnEntry(res)
					}
				case err != nil:
					if firstErr == nil {
						firstErr = err
					}
				default:
					rep.add(&res)
					if r.OnEntry != nil {
						r.OnEntry(res)
					}
				}
			}()
		}
	}
	wg.Wait()
	return firstErr
}
