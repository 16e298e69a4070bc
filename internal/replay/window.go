package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Windows (issue 16, "replay bounded by the target"). Handled one by one,
// every replayed entry costs the single-process store two fsynced commits
// (its intent, its outcome) on the run's critical path: with one worker the
// run goes at the disk's fsync rate, not the target's. A run on bbolt
// therefore handles its entries in windows: every entry of a window is
// decided concurrently; the dispatch intents of all of them are written in
// one transaction; they are dispatched, at most MaxParallel at a time; and
// their outcomes are written together in one transaction.
//
// The invariants are those of one entry (claim.go), unchanged:
//   - no dispatch without a durable intent: an entry waits for the commit
//     of the window's intent transaction before it dispatches;
//   - a crash leaves dispatching -> outcome_unknown: a kill between the
//     two commits leaves up to a window of dispatching records, which
//     Recover turns into outcome_unknown as it does one;
//   - one entry's failure is its own: when a grouped transaction fails, each
//     of its parts is committed again alone, so the failing one gets the
//     error and the others go on.
//
// Windows overlap (issue 16, "CPU per entry"): while a window dispatches,
// the entries of the next are read (their ledger records and stored
// entries, in one read transaction for the whole window) and decided on
// every core; and once windows reach full size, the next window starts as
// soon as this one's intents are written, so its intent transaction is
// written while this one's requests are out. At most two windows are in
// flight, never with a key or ref in common, and --max-parallel bounds
// what both send together. Anything read ahead of a key that a window
// then wrote is read again before use; a person's hold set meanwhile is
// seen by the intent's own transaction, which refuses to dispatch it.
//
// A window never holds two entries with the same idempotency key: the
// second would wait for the first's key lock while the first waits for the
// window, and the ledger must see the first's outcome before deciding the
// second.

// A window starts at one entry and doubles after each window in which
// every dispatch was answered (slow start); at the first sign of trouble
// (a retryable or unknown outcome, a held entry, a breaker not closed) it
// falls back to one entry. Within a window every entry passes its target's
// circuit breaker before any of them is sent, so only one entry at a time
// lets the breaker see each answer before it admits the next, as a run
// without windows does: an outage opens it after the same number of
// attempts, and the entries after that spend nothing.

// WindowSize is the most entries a run on a single-process store handles
// together (once its target has answered every dispatch of the smaller
// windows before).
func (r *Reconciler) WindowSize() int {
	if r.Window > 0 {
		return max(r.Window, 1)
	}
	return max(4*r.MaxParallel, 64)
}

// window is one group of entries handled together.
type window struct {
	intents  *commitGroup
	outcomes *commitGroup
	// queue, on a shared store, takes the intents and outcomes instead
	// (shared_window.go): its window has no fixed members.
	queue *commitQueue
	sends chan struct{} // dispatches in flight, up to MaxParallel (shared by the windows in flight)
}

// slot is one entry's membership of its window's commit groups.
type slot struct {
	win             *window
	mu              sync.Mutex
	intent, outcome bool // submitted to (or left) the group
}

// slotOf is h's slot (nil: handled alone).
func slotOf(h *handling) *slot {
	if h == nil {
		return nil
	}
	return h.slot
}

// finish leaves the groups the entry did not write through, so that the
// others' commits do not wait for it.
func (s *slot) finish(ctx context.Context) {
	if s.win.queue != nil {
		return // nothing waits for what this entry did not write
	}
	s.mu.Lock()
	intent, outcome := s.intent, s.outcome
	s.intent, s.outcome = true, true
	s.mu.Unlock()
	if !intent {
		s.win.intents.leave(ctx)
	}
	if !outcome {
		s.win.outcomes.leave(ctx)
	}
}

// completer commits one write of an entry's handling (its intent before
// the send, its outcome after, each with its audit records) and returns
// once it is durable or failed, as River's job completer does, inline or
// batched behind one interface:
//   - inline: Store.Update, the entry's write alone (which bbolt still
//     groups with concurrent writers: store/bolt/batch.go);
//   - a commitGroup: a window's members on bbolt, committed together once
//     each has submitted or left;
//   - a commitQueue: a shared store's worker, whatever is pending when a
//     transaction can start.
//
// Both batched kinds end in commitGroup.flush: on bbolt the store's own
// group commit (Bolt.UpdateGroup, the one Update uses), elsewhere one
// transaction with each part under its claim.
type completer interface {
	submit(ctx context.Context, fn func(store.Tx) error) error
}

// inline is the completer of an entry handled alone.
type inline struct{ s store.Store }

func (c inline) submit(ctx context.Context, fn func(store.Tx) error) error {
	return c.s.Update(context.WithoutCancel(ctx), fn)
}

// completerFor is where an entry's intent (or outcome) goes: its window's
// group the first time, its worker's queue, else inline.
func (r *Reconciler) completerFor(h *handling, intent bool) completer {
	s := slotOf(h)
	switch {
	case s == nil:
		return inline{r.Store}
	case s.win.queue != nil:
		return s.win.queue
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if intent && !s.intent {
		s.intent = true
		return s.win.intents
	}
	if !intent && !s.outcome {
		s.outcome = true
		return s.win.outcomes
	}
	return inline{r.Store} // a second write of the same kind: alone
}

// commitIntent writes an entry's dispatch intent (completerFor). It
// returns once the intent is durable (or failed).
func (r *Reconciler) commitIntent(ctx context.Context, h *handling, fn func(store.Tx) error) error {
	return r.completerFor(h, true).submit(ctx, fn)
}

// commitOutcome writes a dispatch's outcome (completerFor).
func (r *Reconciler) commitOutcome(ctx context.Context, h *handling, fn func(store.Tx) error) error {
	return r.completerFor(h, false).submit(ctx, fn)
}

// send dispatches, at most MaxParallel of a window at a time. Under a
// claim (a shared store) it keeps the claim's lease ahead of the wait
// for a place and of the dispatch (keepClaim), and sends nothing once
// the claim is lost.
func (r *Reconciler) send(ctx context.Context, h *handling, route Route, req Request) (Result, error) {
	release, err := r.outboundClaimed(ctx, h)
	if err != nil {
		return Result{}, err
	}
	defer release()
	if err := r.keepClaim(ctx, h); err != nil {
		return Result{}, err
	}
	return route.Dispatcher.Dispatch(context.WithoutCancel(ctx), req), nil
}

// outboundClaimed is outbound for an entry under a claim: as it starts to
// wait for its place (it may have waited for a worker before) and every
// quarter of a lease while it waits, its lease is renewed when a quarter
// of it has passed.
func (r *Reconciler) outboundClaimed(ctx context.Context, h *handling) (release func(), err error) {
	s := slotOf(h)
	if s == nil || h.lease == nil {
		return outbound(h), nil
	}
	tick := time.NewTicker(max(r.Lease/4, time.Millisecond))
	defer tick.Stop()
	for {
		if err := r.keepClaim(ctx, h); err != nil {
			return nil, err
		}
		select {
		case s.win.sends <- struct{}{}:
			return func() { <-s.win.sends }, nil
		case <-tick.C:
		}
	}
}

// outbound takes one of the window's MaxParallel places for a call to a
// target or source (a dispatch, a probe, a write-back): a window decides
// many entries at once, but --max-parallel still bounds what they send.
func outbound(h *handling) (release func()) {
	s := slotOf(h)
	if s == nil {
		return func() {}
	}
	s.win.sends <- struct{}{}
	return func() { <-s.win.sends }
}

// commitGroup commits the writes of a known number of members in one
// transaction, once each member has submitted its write or left.
type commitGroup struct {
	s     Store
	mu    sync.Mutex
	left  int // members yet to submit or leave
	calls []*groupCall
	// flushed is closed once every member submitted or left and the
	// group's transaction (if any) was written.
	flushed chan struct{}
}

type groupCall struct {
	fn   func(store.Tx) error
	done chan error
	// fence is the claim the call writes under (a shared store): each
	// call of a grouped transaction is checked against its own.
	fence *store.Fence
}

func newGroupCall(ctx context.Context, fn func(store.Tx) error) *groupCall {
	c := &groupCall{fn: fn, done: make(chan error, 1)}
	if f, ok := store.FenceFrom(ctx); ok {
		c.fence = &f
	}
	return c
}

// run runs the call's writes in tx, under its own claim when it has one.
// A panic is the call's error: the group's transaction fails, and each call
// is committed again alone (flush), so only this one fails.
func (c *groupCall) run(tx store.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while writing a window's transaction: %v", p)
		}
	}()
	if c.fence != nil {
		// Only a shared store's claims put a fence in a call's context.
		return tx.UnderFence(*c.fence, c.fn)
	}
	return c.fn(tx)
}

// checkFences checks the claims of a grouped transaction's calls on a
// shared store in one round trip (PostgreSQL); stale[i] is the error of a
// call whose claim is no longer current, which is then left out of the
// transaction (it writes nothing, and is not dispatched), instead of
// failing every call's write with it.
func checkFences(tx store.Tx, calls []*groupCall) (stale []error, err error) {
	if len(calls) < 2 {
		return nil, nil
	}
	var fs []store.Fence
	var at []int
	for i, c := range calls {
		if c.fence != nil {
			fs, at = append(fs, *c.fence), append(at, i)
		}
	}
	if len(fs) < 2 {
		return nil, nil
	}
	errs, err := tx.CheckFences(fs)
	if err != nil {
		return nil, err
	}
	stale = make([]error, len(calls))
	for j, i := range at {
		stale[i] = errs[j]
	}
	return stale, nil
}

func newCommitGroup(s Store, members int) *commitGroup {
	g := &commitGroup{s: s, left: members, flushed: make(chan struct{})}
	if members == 0 {
		close(g.flushed)
	}
	return g
}

// submit adds fn to the group's transaction and waits for its commit.
func (g *commitGroup) submit(ctx context.Context, fn func(store.Tx) error) error {
	c := newGroupCall(ctx, fn)
	g.arrive(ctx, c)
	return <-c.done
}

// leave says this member writes nothing through the group.
func (g *commitGroup) leave(ctx context.Context) { g.arrive(ctx, nil) }

func (g *commitGroup) arrive(ctx context.Context, c *groupCall) {
	g.mu.Lock()
	if c != nil {
		g.calls = append(g.calls, c)
	}
	g.left--
	last := g.left == 0
	var calls []*groupCall
	if last {
		calls, g.calls = g.calls, nil
	}
	g.mu.Unlock()
	if len(calls) > 0 {
		// The last member's claim is not the group's: each call brings
		// its own.
		g.flush(store.WithoutFence(context.WithoutCancel(ctx)), calls)
	}
	if last {
		close(g.flushed)
	}
}

// flush commits every call in one transaction; when that fails, each call
// is committed alone, so that only the failing one sees an error.
func (g *commitGroup) flush(ctx context.Context, calls []*groupCall) {
	answered := 0
	defer func() {
		if p := recover(); p != nil {
			for _, c := range calls[answered:] {
				c.done <- fmt.Errorf("panic while writing a window's transaction: %v", p)
			}
		}
	}()
	if !g.s.Features().Shared {
		// bbolt: the store's group commit, now (no timer to wait out);
		// each call's error is its own there.
		fns := make([]func(store.Tx) error, len(calls))
		for i, c := range calls {
			fns[i] = c.run
		}
		for i, err := range g.s.UpdateGroup(ctx, fns) {
			calls[i].done <- err
			answered++
		}
		return
	}
	var stale []error // per call: its claim is no longer current (left out)
	err := g.s.Update(ctx, func(tx store.Tx) error {
		var err error
		if stale, err = checkFences(tx, calls); err != nil {
			return err
		}
		for i, c := range calls {
			if stale != nil && stale[i] != nil {
				continue
			}
			if err := c.run(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || len(calls) == 1 {
		for i, c := range calls {
			if err == nil && stale != nil && stale[i] != nil {
				c.done <- stale[i]
			} else {
				c.done <- err
			}
			answered++
		}
		return
	}
	for _, c := range calls {
		err := g.soloCall(ctx, c)
		c.done <- err
		answered++
	}
}

// soloCall commits one call alone, under its own claim; a panic is that
// call's error.
func (g *commitGroup) soloCall(ctx context.Context, c *groupCall) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while writing: %v", p)
		}
	}()
	if c.fence != nil {
		ctx = store.WithFence(ctx, *c.fence)
	}
	return g.s.Update(ctx, c.fn)
}

// passWindows is pass on a single-process store: the feed's work in
// windows of distinct keys (and refs), each handled as above. While one
// window dispatches, the entries of the next are read and decided
// (prepare, below), so that the target is not left idle while the run
// decides, and the store is read once per window instead of three times
// per entry.
func (r *Reconciler) passWindows(ctx context.Context, feed func(context.Context, func(work) bool) error, account func(done)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	size, most := 1, r.WindowSize()
	// The feed runs ahead on a goroutine of its own, up to two full
	// windows: the sources' decoding takes CPU time the windows leave
	// (their fsyncs, their waits for answers and for their members)
	// instead of the loop's. What is read ahead and not handled when the
	// run stops is left for the next run, as the queue's entries are.
	feedCtx, stopFeed := context.WithCancel(ctx)
	feedAhead := make(chan work, 2*most)
	feedDone := make(chan struct{})
	var (
		feedErr   error // set before feedAhead is closed
		feedPanic any   // a source's panic, raised again on the loop (as iter.Pull did)
	)
	go func() {
		defer close(feedDone)
		defer close(feedAhead)
		defer func() { feedPanic = recover() }()
		feedErr = feed(feedCtx, func(w work) bool {
			select {
			case feedAhead <- w:
				return true
			case <-feedCtx.Done():
				return false
			}
		})
	}()
	next := func() (work, bool) {
		w, ok := <-feedAhead
		if !ok && feedPanic != nil {
			panic(feedPanic)
		}
		return w, ok
	}
	stop := func() {
		stopFeed()
		for range feedAhead {
		}
		<-feedDone
	}
	defer stop()
	// One bound on what every window in flight sends: --max-parallel.
	sends := make(chan struct{}, max(r.MaxParallel, 1))
	var (
		queue     []*queued
		exhausted bool
		inflight  *running // a full window still dispatching, its intents written
		firstErr  error
	)
	// fill pulls from the feed until the queue holds n entries.
	fill := func(n int) {
		for !exhausted && len(queue) < n && ctx.Err() == nil {
			w, ok := next()
			if !ok {
				exhausted = true
				break
			}
			queue = append(queue, &queued{w: w})
		}
	}
	// finish waits for a window, accounts for its entries, makes stale what
	// was read ahead of its keys and refs (read again before use), and
	// sizes the next window.
	finish := func(w *running) {
		results, err := w.wait()
		for _, q := range queue {
			if w.keys["k"+q.w.e.IdempotencyKey] || w.keys["r"+q.w.e.Ref()] {
				q.pre = nil
			}
		}
		clean := true
		for _, d := range results {
			clean = clean && answered(&d.res)
			account(d)
		}
		if clean && r.Breakers.allClosed() {
			size = min(2*size, most)
		} else {
			size = 1
		}
		if err != nil && firstErr == nil {
			firstErr = err
			cancel()
		}
	}
	for firstErr == nil {
		fill(size)
		if len(queue) == 0 || ctx.Err() != nil {
			break
		}
		// The window: the first entries of the queue up to size, stopping
		// before a key or ref it already holds, or that the window still in
		// flight holds (that one must see the other's outcome first).
		seen := map[string]bool{}
		n := 0
		for n < len(queue) && n < size {
			k, ref := "k"+queue[n].w.e.IdempotencyKey, "r"+queue[n].w.e.Ref()
			if seen[k] || seen[ref] || inflight != nil && (inflight.keys[k] || inflight.keys[ref]) ||
				orderBlocks(&queue[n].w.e, seen, inflight) {
				break
			}
			seen[k], seen[ref] = true, true
			n++
		}
		if n == 0 {
			finish(inflight) // the next entry waits for the window in flight
			inflight = nil
			continue
		}
		win := queue[:n:n]
		queue = queue[n:]
		r.prepare(ctx, unprepared(win)) // those not read before (the first window, after a split)
		// A full-size window (its target answered every dispatch of the
		// smaller ones) lets the next one start once its intents are
		// written: the next window's writes then overlap this one's
		// dispatches. Any other window is waited for.
		steady := size == most
		cur := r.startWindow(ctx, win, seen, sends)
		// While it runs, read from the feed what the next window may hold
		// (twice this one, when this one goes well) and prepare it: the
		// sources' decoding overlaps the window's work instead of
		// delaying its start (fill appends past win's end).
		fill(min(2*size, most))
		ahead := unprepared(queue)
		prepared := make(chan struct{})
		go func() {
			defer close(prepared)
			r.prepare(ctx, ahead)
		}()
		if steady {
			select {
			case <-cur.win.intents.flushed:
			case <-cur.finished:
			}
		} else {
			<-cur.finished
		}
		<-prepared
		if inflight != nil {
			finish(inflight)
			inflight = nil
		}
		select {
		case <-cur.finished:
			finish(cur)
		default:
			if steady && size == most && firstErr == nil {
				inflight = cur
			} else {
				finish(cur) // trouble in the window before: wait for this one
			}
		}
	}
	if inflight != nil {
		finish(inflight)
	}
	stop()
	if firstErr != nil {
		return firstErr
	}
	if feedErr != nil && ctx.Err() == nil {
		return feedErr
	}
	return nil
}

// queued is an entry read from the feed, with what was read and decided
// for it ahead of its window (nil: not yet, or no longer current).
type queued struct {
	w   work
	pre *prepared
}

// prepared is what a window reads and decides for one entry before
// handling it: its ledger record and stored entry, read together with
// the window's others in one read transaction, and its decision.
type prepared struct {
	ref      string
	view     triage.LedgerView
	ledger   idempotency.Record // as read (zero: no record)
	entry    *store.EntryRecord
	approval *store.Approval // the entry's current approval request (nil: none)
	decision triage.Decision
	// spent: handle has written on this read; its later writes rest on
	// its own (the key is locked), not on the read ahead.
	spent atomic.Bool
}

// errStaleRead says the entry or its key changed after its window read
// them: handle decides again on what is stored (not an ErrConflict, which
// would end the entry in manual review).
var errStaleRead = errors.New("the entry or its key changed after it was read ahead")

// guarded runs fn only if what handle decided on still holds: the
// decision, budget and schedule were read ahead, and anything written
// since (a Replay now in the same serve, a person's resolve or release, a
// second copy of the key in the same window) makes them stale. The
// ledger's compare-and-set alone would not see it: a retried dispatch
// puts the key back to decided with one replay more.
func guarded(h *handling, e *entry.Entry, fn func(store.Tx) error) func(store.Tx) error {
	var p *prepared
	if h != nil {
		p = h.basis
	}
	if p == nil || p.spent.Load() {
		return fn
	}
	return func(tx store.Tx) error {
		if p.spent.Load() {
			return fn(tx)
		}
		if err := p.still(tx, e); err != nil {
			return err
		}
		return fn(tx)
	}
}

// spend marks the read ahead handle acted on as written over by handle
// itself, once a guarded write committed.
func spend(h *handling, err error) error {
	if h != nil && h.basis != nil && err == nil {
		h.basis.spent.Store(true)
	}
	return err
}

// still reports errStaleRead when the stored entry or ledger record is no
// longer what p read.
func (p *prepared) still(tx store.Tx, e *entry.Entry) error {
	er, err := tx.Entry(e.Ref())
	if err != nil {
		return err
	}
	if !sameEntryState(p.entry, er) {
		return errStaleRead
	}
	if e.IdempotencyKey == "" {
		return nil
	}
	rec, err := tx.Ledger(e.IdempotencyKey)
	if err != nil {
		return err
	}
	var cur idempotency.Record
	if rec != nil {
		cur = *rec
	}
	if !sameLedger(p.ledger, cur) {
		return errStaleRead
	}
	return nil
}

// sameEntryState compares what other writers change on an entry record.
func sameEntryState(a, b *store.EntryRecord) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.Hold == b.Hold && a.Action == b.Action && a.Reason == b.Reason &&
		a.LastDecision == b.LastDecision && a.Evidence == b.Evidence && a.ApprovalID == b.ApprovalID &&
		a.Probe == b.Probe && a.WriteBackPending == b.WriteBackPending && a.NextAttemptAt.Equal(b.NextAttemptAt)
}

// sameLedger compares what a transition changes on a ledger record.
func sameLedger(a, b idempotency.Record) bool {
	return a.State == b.State && a.Replays == b.Replays && a.NotSent == b.NotSent && a.Rearmed == b.Rearmed &&
		a.PayloadHash == b.PayloadHash && a.Owner == b.Owner && a.Updated.Equal(b.Updated) &&
		a.Dispatched.Equal(b.Dispatched)
}

func unprepared(qs []*queued) []*queued {
	var out []*queued
	for _, q := range qs {
		if q.pre == nil {
			out = append(out, q)
		}
	}
	return out
}

// prepare reads the ledger record and stored entry of every entry of qs in
// one read transaction, then decides each on every core. An entry it
// cannot prepare (a read error, a dispatch left without an outcome to
// recover, a panic while deciding) keeps pre nil: handle then does it
// the long way, where such failures are reported and isolated.
func (r *Reconciler) prepare(ctx context.Context, qs []*queued) {
	if len(qs) == 0 || ctx.Err() != nil {
		return
	}
	pres := make([]*prepared, len(qs))
	if err := r.Store.View(ctx, func(tx store.Tx) error {
		for i, q := range qs {
			e := &q.w.e
			if e.IdempotencyKey == "" {
				continue
			}
			p, err := readFacts(tx, e)
			if err != nil || p.ledger.State == idempotency.Dispatching {
				continue // the long way: recovery (claim.go) first, a read error reported
			}
			pres[i] = p
		}
		return nil
	}); err != nil {
		return // the long way, entry by entry, reports the error
	}
	decide := func(i int) {
		p := pres[i]
		if p == nil {
			return
		}
		defer func() {
			if recover() != nil {
				pres[i] = nil // handle decides again, isolating the panic
			}
		}()
		d, err := r.decideOn(ctx, &qs[i].w.e, p.view, p.approval, "")
		if err != nil {
			pres[i] = nil // the long way reports it
			return
		}
		p.decision = d
	}
	(&triage.Pipeline{}).Each(len(qs), decide)
	if ctx.Err() != nil {
		return // a decision cut short by the stop is not kept
	}
	for i, q := range qs {
		q.pre = pres[i]
	}
}

// running is a started window.
type running struct {
	win      *window
	keys     map[string]bool // "k"+key, "r"+ref and "o"+sequence (order.go) of its entries
	results  []done
	handled  []bool
	errs     []error
	finished chan struct{} // closed when every entry was handled
}

// startWindow handles one window: every entry in its own goroutine, the
// commit groups tying their intents and outcomes together, what they send
// bounded by sends.
func (r *Reconciler) startWindow(ctx context.Context, batch []*queued, keys map[string]bool, sends chan struct{}) *running {
	w := &running{
		win: &window{
			intents:  newCommitGroup(r.Store, len(batch)),
			outcomes: newCommitGroup(r.Store, len(batch)),
			sends:    sends,
		},
		keys:     keys,
		results:  make([]done, len(batch)),
		handled:  make([]bool, len(batch)),
		errs:     make([]error, len(batch)),
		finished: make(chan struct{}),
	}
	var wg sync.WaitGroup
	for i, q := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &slot{win: w.win}
			defer s.finish(ctx)
			if ctx.Err() != nil {
				return // stopping: start no entry
			}
			wk := q.w
			wk.pre = q.pre
			w.results[i], w.errs[i] = r.do(ctx, wk, s)
			w.handled[i] = w.errs[i] == nil
		}()
	}
	go func() {
		wg.Wait()
		close(w.finished)
	}()
	return w
}

// wait returns the window's handled entries in window order and the first
// error that stops the run.
func (w *running) wait() ([]done, error) {
	<-w.finished
	out := make([]done, 0, len(w.results))
	var first error
	for i := range w.results {
		if w.handled[i] {
			out = append(out, w.results[i])
		} else if w.errs[i] != nil && first == nil {
			first = w.errs[i]
		}
	}
	return out, first
}

// owesWriteBack reports whether the entry's WriteBackPending differs from
// pending: only then does a source without write-back need a commit.
func (r *Reconciler) owesWriteBack(ctx context.Context, ref, pending string) bool {
	owed := true
	if err := r.Store.View(ctx, func(tx store.Tx) error {
		er, err := tx.Entry(ref)
		if err == nil {
			owed = er != nil && er.WriteBackPending != pending
		}
		return err
	}); err != nil {
		return true // not known: write as before, where the error is reported
	}
	return owed
}

// answered reports whether an entry's handling shows its target up: no
// retryable or unknown outcome, not held for its breaker.
func answered(res *EntryResult) bool {
	for _, o := range res.Replays {
		if o == Retry.String() || o == NotSent.String() || o == Unknown.String() {
			return false
		}
	}
	return res.Outcome != OutcomeUnavailable
}

// allClosed reports whether every target's breaker is closed with no
// failure counted.
func (b *Breakers) allClosed() bool {
	for _, s := range b.States() {
		if s.State != BreakerClosed || s.Failures > 0 {
			return false
		}
	}
	return true
}
