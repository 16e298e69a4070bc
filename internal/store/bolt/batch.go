package bolt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/store"
)

// UpdateNow runs fn in a read-write transaction committed at once, outside
// bbolt's Batch: for a caller that has already grouped its writes (a
// replay window) and would otherwise wait out MaxBatchDelay for writers
// that are not coming. fn runs once; its error rolls everything back.
func (s *Bolt) UpdateNow(ctx context.Context, fn func(store.Tx) error) error {
	if s.ro {
		return store.ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.tamper.Count(s.db.Update(func(btx *bolt.Tx) error { return s.runWrite(btx, fn) }))
}

// UpdateGroup commits fns together in one read-write transaction, now:
// the group commit of a caller that has grouped its writes itself (a
// replay window's intents or outcomes), which would otherwise wait out
// MaxBatchDelay for writers that are not coming. It is the same group
// commit as Update's (writeGroup.commit), so each fn's error is its own:
// one that fails (or panics) is run again alone, and the others commit
// without it. errs[i] is fns[i]'s; a panic is its fn's error.
func (s *Bolt) UpdateGroup(ctx context.Context, fns []func(store.Tx) error) []error {
	errs := make([]error, len(fns))
	var early error
	switch {
	case s.ro:
		early = store.ErrReadOnly
	case ctx.Err() != nil:
		early = ctx.Err()
	}
	if early != nil {
		for i := range errs {
			errs[i] = early
		}
		return errs
	}
	chans := make([]chan error, len(fns))
	g := &writeGroup{s: s, calls: make([]groupCall, len(fns))}
	for i, fn := range fns {
		chans[i] = make(chan error, 1)
		g.calls[i] = groupCall{fn: fn, err: chans[i]}
	}
	g.commit()
	for i, ch := range chans {
		// Alone, a panic is this fn's error, not its caller's (who waits
		// for the others' answers too).
		fn := fns[i]
		errs[i] = s.tamper.Count(s.answer(<-ch, func(t store.Tx) error { return safelyCall(fn, t) }))
	}
	return errs
}

// groupCommit groups concurrent Updates into one commit, as bbolt's Batch
// does (same MaxBatchSize and MaxBatchDelay, same retry of the others when
// one caller fails), but runs every caller's fn on one boltTx and flushes
// it once, just before the commit (issue 16). Under Batch each caller had
// its own boltTx: each read and decoded the audit head and wrote it back,
// and moved the store's shared counters (entries, cells, topics, days,
// hours, outcomes) by itself, a bbolt lookup and put per counter per
// caller, all inside bbolt's single write lock, where every microsecond is
// serial. Now a group of 32 dispatches moves each counter once.
type groupCommit struct {
	mu      sync.Mutex
	pending *writeGroup
}

type writeGroup struct {
	s     *Bolt
	timer *time.Timer
	start sync.Once
	calls []groupCall
}

type groupCall struct {
	fn  func(store.Tx) error
	err chan<- error
}

// errTrySolo tells a caller whose fn failed inside a group to run it
// alone, so that its error is its own and the others commit without it.
var errTrySolo = errors.New("run the write alone")

// batch runs fn in the next group commit.
func (s *Bolt) batch(fn func(store.Tx) error) error {
	errCh := make(chan error, 1)
	s.group.mu.Lock()
	if s.group.pending == nil || len(s.group.pending.calls) >= s.db.MaxBatchSize {
		g := &writeGroup{s: s}
		g.timer = time.AfterFunc(s.db.MaxBatchDelay, g.trigger)
		s.group.pending = g
	}
	g := s.group.pending
	g.calls = append(g.calls, groupCall{fn: fn, err: errCh})
	if len(g.calls) >= s.db.MaxBatchSize {
		go g.trigger() // full: commit now, without waiting out the delay
	}
	s.group.mu.Unlock()
	return s.answer(<-errCh, fn)
}

// answer is a grouped call's result: errTrySolo runs fn again alone.
func (s *Bolt) answer(err error, fn func(store.Tx) error) error {
	if errors.Is(err, errTrySolo) {
		err = s.db.Update(func(btx *bolt.Tx) error { return s.runWrite(btx, fn) })
	}
	return err
}

func (g *writeGroup) trigger() { g.start.Do(g.run) }

// run commits a group Update gathered: no caller joins it any more.
func (g *writeGroup) run() {
	g.s.group.mu.Lock()
	g.timer.Stop()
	if g.s.group.pending == g {
		g.s.group.pending = nil
	}
	g.s.group.mu.Unlock()
	g.commit()
}

// commit commits the group: every fn on one boltTx, then its flush. A fn
// that fails is taken out and told to run alone; the rest run again in a
// new transaction (the failed one rolled back everything).
func (g *writeGroup) commit() {
	for len(g.calls) > 0 {
		failed, flushFailed := -1, false
		err := g.s.db.Update(func(btx *bolt.Tx) error {
			setFillPercent(btx)
			t := g.s.writeTx(btx)
			for i, c := range g.calls {
				if err := safelyCall(c.fn, t); err != nil {
					failed = i
					return err
				}
			}
			if err := safelyCall(func(store.Tx) error { return t.flush() }, t); err != nil {
				flushFailed = true
				return err
			}
			return nil
		})
		if failed >= 0 {
			c := g.calls[failed]
			g.calls[failed], g.calls = g.calls[len(g.calls)-1], g.calls[:len(g.calls)-1]
			c.err <- errTrySolo
			continue
		}
		if flushFailed && len(g.calls) > 1 {
			// What the members left pending failed to write, and it is
			// not known whose part did: each runs again alone, so the
			// error (or panic) is only its own.
			for _, c := range g.calls {
				c.err <- errTrySolo
			}
			return
		}
		for _, c := range g.calls {
			c.err <- err
		}
		return
	}
}

// safelyCall runs fn, its panic an error: the caller runs it again alone,
// where the panic is its own.
func safelyCall(fn func(store.Tx) error, t store.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in a grouped write: %v", p)
		}
	}()
	return fn(t)
}
