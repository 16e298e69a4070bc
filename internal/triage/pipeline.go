package triage

import (
	"context"
	"iter"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/replayctl/replayctl/internal/entry"
)

// Pipeline decides a stream of entries on several goroutines and hands the
// decisions back in input order. A decision is a pure function of its entry
// and the ledger's view, so entries can be decided in any order; only the
// output order is kept. Memory stays flat: at most a few batches per worker
// are in flight, whatever the stream's length.
type Pipeline struct {
	// Workers is the number of deciding goroutines; 0 means GOMAXPROCS.
	Workers int
	// Decide decides one entry. It is called concurrently.
	Decide func(ctx context.Context, e *entry.Entry) (Decision, error)
}

// pipelineBatch is the unit handed between the stages: one channel
// operation per batch rather than per entry.
const pipelineBatch = 64

type batch struct {
	entries   []entry.Entry
	decisions []Decision
	err       error // the stream's error, after the entries
	// derr is the first Decide error, for entries[derrAt]: the entries
	// before it are emitted, then Run returns it.
	derr   error
	derrAt int
	done   chan struct{} // closed when decided
}

// Run decides every entry entries(ctx) yields and calls emit with each entry and its
// decision, in the order entries yielded them, from the calling goroutine.
// It stops at the first error: the stream's, Decide's or emit's, returned
// as it is, after every entry before it was emitted. The stream is opened
// with Run's own context, so returning early also stops a source that
// would otherwise block (a live source waiting on the network).
func (p *Pipeline) Run(ctx context.Context, entries func(context.Context) iter.Seq2[entry.Entry, error], emit func(*entry.Entry, *Decision) error) error {
	workers := p.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	work := make(chan *batch, workers)
	order := make(chan *batch, 2*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				p.decide(ctx, b)
			}
		}()
	}
	// The reader: the stream is read on one goroutine, as an iterator must be.
	go func() {
		defer close(order)
		defer close(work)
		b := newBatch()
		send := func() bool {
			select {
			case order <- b:
			case <-ctx.Done():
				return false
			}
			work <- b // a worker is always there to take it
			b = newBatch()
			return true
		}
		for e, err := range entries(ctx) {
			if err != nil {
				b.err = err
				break
			}
			b.entries = append(b.entries, e)
			if len(b.entries) == pipelineBatch && !send() {
				return
			}
		}
		if len(b.entries) > 0 || b.err != nil {
			send()
		}
	}()
	defer wg.Wait()
	defer cancel() // runs before wg.Wait: an early return stops the reader and workers

	for b := range order {
		select {
		case <-b.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		for i := range b.entries {
			if b.derr != nil && i == b.derrAt {
				return b.derr
			}
			if err := emit(&b.entries[i], &b.decisions[i]); err != nil {
				return err
			}
		}
		if b.err != nil {
			return b.err
		}
	}
	return ctx.Err()
}

func newBatch() *batch {
	return &batch{entries: make([]entry.Entry, 0, pipelineBatch), done: make(chan struct{})}
}

func (p *Pipeline) decide(ctx context.Context, b *batch) {
	defer close(b.done)
	b.decisions = make([]Decision, len(b.entries))
	for i := range b.entries {
		if ctx.Err() != nil {
			b.derr, b.derrAt = ctx.Err(), i
			return
		}
		d, err := p.Decide(ctx, &b.entries[i])
		if err != nil {
			b.derr, b.derrAt = err, i
			return
		}
		b.decisions[i] = d
	}
}

// Each calls fn(i) for every i in [0, n) on the pipeline's workers (0:
// GOMAXPROCS) and returns when all are done: a batch already in memory
// (a replay window's entries) decided on every core. fn must be safe for
// concurrent use; each i is given to exactly one call.
func (p *Pipeline) Each(n int, fn func(i int)) {
	workers := p.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		}()
	}
	wg.Wait()
}
