package replay

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

const ingestBatch = 500

// One runner loop for both stores (issue 14, "fold the single-process and
// shared-store code paths into one"): a run feeds work into the same
// worker pool, every entry goes through the same claim (claim.go) and the
// same dispatch (schedule, breaker, ledger CAS), and the same accounting
// builds the report. Only where the work comes from differs:
//
//   - bbolt (one process): the sources, entry by entry;
//   - a shared store: every worker ingests the sources (idempotently), then
//     the workers share the entries by claiming leased batches; each entry
//     is handled under its claim's fencing token, so a worker that lost its
//     lease can neither record nor dispatch.
//
// With MaxWait, the entries left waiting for a retry (or for their
// target's breaker) are taken again, by ref, once they come due within
// the run's bound: the run sleeps on its Clock, never longer than the
// shortest pending retry.

// work is one entry for the runner. On a shared store it is handled under
// claim; a nil claim there is taken by ref (a retry within the run).
type work struct {
	e     entry.Entry
	src   source.Source
	claim *store.Claim
	// pre is what was read and decided ahead for e (window.go; nil: the
	// handling reads and decides).
	pre *prepared
}

// done is one handled entry; counted is false when another worker has
// it: its claim was lost (stale: nothing of it was recorded) or, for a
// retry within the run, could not be taken.
type done struct {
	w       work
	res     EntryResult
	counted bool
	stale   bool
	// stopped: the run was being stopped before the entry was handled in
	// full; what was written stays, and the next run takes it.
	stopped bool
}

// Run reconciles every entry of the sources once.
func (r *Reconciler) Run(ctx context.Context, srcs []source.Source) (*Report, error) {
	srcs = source.Distinct(srcs)
	r.defaults()
	rep := &Report{Started: r.Clock.Now().UTC(), Summary: NewSummary(), StatusCounts: map[string]int{}}
	if err := r.useHolds(ctx, rep); err != nil {
		return r.finish(rep), err
	}
	defer func() {
		for _, src := range srcs {
			// A broker acks or commits what its entries' stores allow in
			// batches; what is left (behind an entry never stored) goes now.
			if f, ok := src.(interface{ Flush(context.Context) error }); ok {
				if err := f.Flush(context.WithoutCancel(ctx)); err != nil {
					rep.Notes = append(rep.Notes, err.Error())
				}
			}
			if n, ok := src.(interface{ Notes() []string }); ok {
				rep.Notes = append(rep.Notes, n.Notes()...)
			}
		}
	}()
	shared := r.Store.Features().Shared
	var feed func(ctx context.Context, yield func(work) bool) error
	var ingested func() error // waits for this worker's ingest, if it leads one
	var since time.Time       // a shared store's run start, on its clock
	if shared {
		start, idx, wait, err := r.ingest(ctx, srcs, r.Store, rep)
		if err != nil {
			return r.finish(rep), err
		}
		since = start
		ingested = wait
		feed = r.claimFeed(r.Store, since, idx)
	} else {
		// On bbolt the file lock keeps every other process out, so any
		// dispatch left without an outcome is a dead owner's.
		n, err := Recover(ctx, r.Store, r.Actor)
		rep.Recovered = n
		if err != nil {
			return r.finish(rep), err
		}
		feed = r.sourceFeed(srcs)
	}

	// Entries waiting for a retry or a breaker are counted in the summary
	// once, with their last result, when the run ends.
	waiting := map[string]done{}
	seen := map[string]bool{}
	account := func(d done) {
		seen[d.w.e.Ref()] = true
		if d.stopped {
			return
		}
		if !d.counted {
			if d.stale {
				rep.StaleClaims++
			}
			// Another worker has it now: this run is done with it.
			if prev, ok := waiting[d.w.e.Ref()]; ok {
				delete(waiting, d.w.e.Ref())
				rep.add(&prev.res)
			}
			return
		}
		rep.addReplays(&d.res)
		if r.OnEntry != nil {
			r.OnEntry(d.res)
		}
		if r.MaxWait > 0 && !d.res.NextAttempt.IsZero() {
			waiting[d.res.Ref] = d
			return
		}
		delete(waiting, d.res.Ref)
		rep.add(&d.res)
	}
	err := r.pass(ctx, feed, account)
	if err == nil && !shared && ctx.Err() == nil {
		// Outcomes a system can tell (settle.go), within --max-parallel.
		// A shared store needs no second pass: its claim feed yields every
		// stored entry once per run, listed by the source or not, so the
		// worker holding an outcome_unknown entry's claim probes it.
		var unknown []work
		if unknown, err = r.unknownToSettle(ctx, seen); err == nil && len(unknown) > 0 {
			err = r.pass(ctx, sliceFeed(unknown), account)
		}
	}
	if ingested != nil {
		if ierr := ingested(); ierr != nil && err == nil {
			err = ierr
		}
	}
	deadline := rep.Started.Add(r.MaxWait)
	for err == nil && len(waiting) > 0 && ctx.Err() == nil {
		next := time.Time{}
		for _, d := range waiting {
			if next.IsZero() || d.res.NextAttempt.Before(next) {
				next = d.res.NextAttempt
			}
		}
		if next.After(deadline) {
			break
		}
		if r.Clock.Sleep(ctx, next.Sub(r.Clock.Now())) != nil {
			break
		}
		now := r.Clock.Now()
		var due []work
		for _, d := range waiting {
			if !d.res.NextAttempt.After(now) {
				due = append(due, work{e: d.w.e, src: d.w.src})
			}
		}
		sort.Slice(due, func(i, j int) bool { return due[i].e.Ref() < due[j].e.Ref() })
		err = r.pass(ctx, sliceFeed(due), account)
	}
	for _, d := range waiting {
		rep.add(&d.res)
	}
	if err == nil && ctx.Err() != nil {
		rep.Interrupted = true
	}
	if shared && err == nil {
		// What this run could not take: entries another worker's live
		// lease holds (one handling them now, or one that died, until
		// its lease ends). Without this a run over 300 entries of which
		// a dead worker held 10 reported 290 and said nothing of them.
		n, until, herr := r.Store.HeldElsewhere(context.WithoutCancel(ctx), r.Owner, since)
		if herr != nil {
			return r.finish(rep), herr
		}
		rep.HeldElsewhere, rep.HeldUntil = n, until
	}
	return r.finish(rep), err
}

func (r *Reconciler) finish(rep *Report) *Report {
	rep.Duration = r.Clock.Now().Sub(rep.Started).Round(time.Millisecond).String()
	rep.AwaitingPeople = rep.Summary.AwaitingPeople()
	return rep
}

// pass handles the work feed yields with MaxParallel workers; account
// sees every result, on the calling goroutine. It returns the first error
// that stopped the run (one entry's failure never does: it is
// quarantined and the run goes on).
func (r *Reconciler) pass(ctx context.Context, feed func(context.Context, func(work) bool) error, account func(done)) error {
	if !r.Store.Features().Shared {
		return r.passWindows(ctx, feed, account)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		firstErr error
		errOnce  sync.Once
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	// A window of claimed entries in flight, their writes grouped
	// (shared_window.go), their calls out within --max-parallel.
	win := &window{queue: newCommitQueue(ctx, r.Store), sends: make(chan struct{}, max(r.MaxParallel, 1))}
	jobs := make(chan work)
	results := make(chan done)
	go func() {
		defer close(jobs)
		err := feed(ctx, func(w work) bool {
			select {
			case jobs <- w:
				return true
			case <-ctx.Done():
				return false
			}
		})
		if err != nil && ctx.Err() == nil {
			fail(err)
		}
	}()
	var wg sync.WaitGroup
	for range r.sharedWindow() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range jobs {
				if ctx.Err() != nil {
					continue // stopping: start no entry, drain the feed
				}
				d, err := r.do(ctx, w, &slot{win: win})
				if err != nil {
					fail(err)
					continue // drain: the feed stops on ctx
				}
				results <- d
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()
	for d := range results {
		account(d)
	}
	// Before a retry within the run (taken by ref) and before the run
	// ends: every entry handled is released.
	if err := r.Store.FlushReleases(context.WithoutCancel(ctx)); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr != nil {
		return firstErr
	}
	return nil
}

// do handles one entry through the claim model of its store. An error
// returned stops the run: only one seen while the run is being stopped.
func (r *Reconciler) do(ctx context.Context, w work, s *slot) (done, error) {
	d, err := r.doEntry(ctx, w, s)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// Only the stop itself: an interruption (Report.Interrupted), not
		// a failure of the run.
		return done{w: w, stopped: true}, nil
	}
	return d, err
}

func (r *Reconciler) doEntry(ctx context.Context, w work, s *slot) (done, error) {
	e := w.e
	if !r.Store.Features().Shared {
		res, err := r.handleSafely(ctx, &handling{slot: s}, &e, w.src, w.pre)
		if err != nil {
			if ctx.Err() != nil {
				return done{}, fmt.Errorf("entry %s: %w", e.Ref(), err)
			}
			res = r.isolate(ctx, &e, fmt.Errorf("entry %s: %w", e.Ref(), err))
		} else {
			notifyStored(ctx, w.src, &e)
		}
		return done{w: w, res: res, counted: true}, nil
	}
	c := w.claim
	if c == nil {
		got, ok, err := r.Store.ClaimRef(ctx, e.Ref(), r.Owner, r.Lease)
		if err != nil {
			return done{}, err
		}
		if !ok {
			return done{w: w}, nil // another worker has it now
		}
		c = &got
		e = c.Entry.Entry
	}
	res, err := r.handleClaim(ctx, *c, w.src, &handling{slot: s}, w.pre)
	switch {
	case errors.Is(err, store.ErrStaleFence):
		return done{w: w, stale: true}, nil
	case err != nil && ctx.Err() == nil:
		// One bad entry never stops the drain: quarantine it, audited,
		// and free its claim.
		res = r.isolate(store.WithFence(ctx, store.Fence{Ref: e.Ref(), Token: c.Token, Key: e.IdempotencyKey}), &e, err)
		if rerr := r.Store.Release(context.WithoutCancel(ctx), e.Ref(), c.Token); rerr != nil {
			// The claim then ends with its lease; the report says so.
			res.Reason += " (its claim could not be released, it ends with its lease: " + rerr.Error() + ")"
		}
	case err != nil:
		return done{}, err
	}
	return done{w: work{e: e, src: w.src}, res: res, counted: true}, nil
}

// sourceFeed yields the sources' entries (bbolt), up to Limit.
func (r *Reconciler) sourceFeed(srcs []source.Source) func(context.Context, func(work) bool) error {
	return func(ctx context.Context, yield func(work) bool) error {
		count := 0
		for _, src := range srcs {
			for e, err := range src.Entries(ctx) {
				if err != nil {
					return fmt.Errorf("source %s: %w", src, err)
				}
				if r.Limit > 0 && count >= r.Limit {
					return nil
				}
				count++
				if !yield(work{e: e, src: src}) {
					return nil
				}
			}
		}
		return nil
	}
}

// claimFeed yields claimed entries of a shared store not checked since
// the run began, up to Limit. It claims MaxParallel at a time (the
// window, shared_window.go, holds four times that), so a slow target call
// holds only its own place, and claims again as soon as those are taken,
// not when a batch is done. With
// nothing claimable it waits while another worker still ingests this run's
// entries, and stops once none does.
func (r *Reconciler) claimFeed(sh store.Shared, since time.Time, idx *sourceIndex) func(context.Context, func(work) bool) error {
	return func(ctx context.Context, yield func(work) bool) error {
		claimed := 0
		settled := false // no worker was ingesting before the last claim
		for ctx.Err() == nil {
			want := r.MaxParallel
			if r.Limit > 0 {
				if claimed >= r.Limit {
					return nil
				}
				want = min(want, r.Limit-claimed)
			}
			claims, err := sh.Claim(ctx, r.Owner, since, want, r.Lease)
			if err != nil {
				return err
			}
			if len(claims) == 0 {
				if settled {
					return nil // no ingest ran during a claim that found nothing
				}
				busy, err := sh.Ingesting(ctx)
				if err != nil {
					return err
				}
				// An ingest that finished between the claim and this check
				// committed entries that claim could not see: claim once more
				// before stopping.
				settled = !busy
				if busy {
					select {
					case <-ctx.Done():
					case <-time.After(idlePoll):
					}
				}
				continue
			}
			settled = false
			for i := range claims {
				c := &claims[i]
				claimed++
				if !yield(work{e: c.Entry.Entry, src: idx.of(c.Entry.Entry.Source), claim: c}) {
					// Not handled: free it for the next run or worker (a
					// claim not freed ends with its lease).
					var errs []error
					for _, rest := range claims[i:] {
						if err := sh.Release(context.WithoutCancel(ctx), rest.Entry.Entry.Ref(), rest.Token); err != nil {
							errs = append(errs, fmt.Errorf("release the claim on %s: %w", rest.Entry.Entry.Ref(), err))
						}
					}
					return errors.Join(errs...)
				}
			}
		}
		return nil
	}
}

func sliceFeed(ws []work) func(context.Context, func(work) bool) error {
	return func(_ context.Context, yield func(work) bool) error {
		for _, w := range ws {
			if !yield(w) {
				return nil
			}
		}
		return nil
	}
}

// ingest starts this run's ingest on a shared store: one worker per run
// (the ingest lead, chosen by the store) reads the sources into the store,
// in batches the workers claim as each commits; the others never read the
// sources. It returns the time the run's claims start from, where to find
// an entry's source (for write-back) and a wait for the lead's ingest.
func (r *Reconciler) ingest(ctx context.Context, srcs []source.Source, sh store.Shared, rep *Report) (time.Time, *sourceIndex, func() error, error) {
	since, err := sh.Now(ctx)
	if err != nil {
		return since, nil, nil, err
	}
	idx := &sourceIndex{srcs: srcs, seen: map[string]source.Source{}}
	done, lead, err := sh.LeadIngest(ctx, since)
	if err != nil {
		return since, nil, nil, err
	}
	if !lead {
		return since, idx, func() error { return nil }, nil
	}
	var (
		n         int
		ingestErr error
	)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		n, ingestErr = r.ingestShared(ctx, srcs, sh, since, idx)
		done(ingestErr == nil)
	}()
	return since, idx, func() error {
		<-finished
		rep.Ingested = n
		return ingestErr
	}, nil
}

// handleClaim handles the entry under its claim (handle recovers a
// dispatch its previous owner left: that owner's lease expired, or we
// could not have claimed it) and releases the claim.
func (r *Reconciler) handleClaim(ctx context.Context, c store.Claim, src source.Source, h *handling, pre *prepared) (EntryResult, error) {
	e := c.Entry.Entry
	fctx := store.WithFence(ctx, store.Fence{Ref: e.Ref(), Token: c.Token, Key: e.IdempotencyKey})
	if !c.Until.IsZero() {
		h.lease = &claimLease{until: c.Until}
	}
	res, err := r.handleSafely(fctx, h, &e, src, pre)
	if err != nil {
		return res, err
	}
	r.Store.ReleaseLater(e.Ref(), c.Token) // sent with the next claim, or when the pass ends
	return res, nil
}

// The lease must outlast the dispatch (issue 16, found in review): in a
// window (shared_window.go) an entry's intent is durable before it has one
// of the --max-parallel places to send, and it may wait there for a few
// other dispatches, so the time from claim to answer is no longer one
// dispatch. Sent under a lease that ran out, a request would go out while
// another worker takes the entry over, and its answer could not be
// recorded: a success left for a person. So once a quarter of the lease
// has passed, the lease is renewed (under the claim's fencing token, and
// only while it is current, as a fence check takes it) when the entry
// starts to wait for its place, every quarter of a lease while it waits,
// and when it has it, so every dispatch starts with at least three
// quarters of a lease ahead; an entry whose claim is lost is not sent at
// all: its next owner finds the durable intent and makes it
// outcome_unknown, as after a crash.

// claimLease is when an entry's claim ends at the latest, on this
// process's clock.
type claimLease struct{ until time.Time }

// keepClaim makes sure the claim in ctx (if any) outlasts the dispatch
// about to start: see above.
func (r *Reconciler) keepClaim(ctx context.Context, h *handling) error {
	if h == nil || h.lease == nil {
		return nil
	}
	l := h.lease
	if time.Until(l.until) > r.Lease*3/4 {
		return nil
	}
	f, fenced := store.FenceFrom(ctx)
	if !fenced {
		return nil // only a shared store's claims have leases
	}
	t0 := time.Now()
	held, err := r.Store.RenewLease(context.WithoutCancel(ctx), f.Ref, f.Token, r.Lease)
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("%w: %s's lease ended while its dispatch waited for a place to send; not sent (its next owner finds the intent and makes it outcome_unknown)", store.ErrStaleFence, f.Ref)
	}
	l.until = t0.Add(r.Lease)
	return nil
}
