package replay

import (
	"context"
	"slices"
	"strconv"
	"sync"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
)

// Order (issue 28: "Kafka replays of one original partition keep their
// original order"). A connector names the sequence an entry belongs to
// in its entry.OrderLabel (Kafka: the original topic and partition). A
// run on a single-process store (passWindows) treats that name as it
// treats a key or a ref: a window never holds two entries of one
// sequence, and never one whose sequence the window still in flight
// holds. So an entry is dispatched only after the one read before it in
// its sequence has its outcome, and in the order the feed gave them (a
// source's read order: a DLT partition's offsets). Entries of different
// sequences still go in parallel, up to --max-parallel.
//
// A bulk replay (`dlq replay` with a selection) orders each sequence's
// entries by their place (entry.OrderPosLabel) in the slots the selection
// gave them, and its workers pass them through an orderChain: an entry
// dispatches only once the one before it in its sequence is done.
//
// Not covered: a shared store's workers (each claims on its own); a retry
// within the run goes after the entries that followed it.

// orderKey is the window key of e's sequence ("" when it has none); its
// prefix keeps it apart from the "k" (idempotency key) and "r" (ref)
// window keys.
func orderKey(e *entry.Entry) string {
	if k := e.Labels[entry.OrderLabel]; k != "" {
		return "o" + k
	}
	return ""
}

// orderBlocks reports whether e cannot join the window being built: its
// sequence is in it (seen) or in the window in flight (nil: none). It
// marks the sequence seen when it can.
func orderBlocks(e *entry.Entry, seen map[string]bool, inflight *running) bool {
	o := orderKey(e)
	if o == "" {
		return false
	}
	if seen[o] || inflight != nil && inflight.keys[o] {
		return true
	}
	seen[o] = true
	return false
}

// orderSequences puts each sequence's entries of sel in order of their
// place, in the slots those entries hold (the rest stay where they are).
func orderSequences(sel []*store.EntryRecord) {
	slots := map[string][]int{}
	for i, er := range sel {
		if o := orderKey(&er.Entry); o != "" {
			slots[o] = append(slots[o], i)
		}
	}
	for _, idx := range slots {
		if len(idx) < 2 {
			continue
		}
		ers := make([]*store.EntryRecord, len(idx))
		for j, i := range idx {
			ers[j] = sel[i]
		}
		slices.SortStableFunc(ers, func(a, b *store.EntryRecord) int { return comparePos(&a.Entry, &b.Entry) })
		for j, i := range idx {
			sel[i] = ers[j]
		}
	}
}

func comparePos(a, b *entry.Entry) int {
	pa, ea := strconv.ParseInt(a.Labels[entry.OrderPosLabel], 10, 64)
	pb, eb := strconv.ParseInt(b.Labels[entry.OrderPosLabel], 10, 64)
	switch {
	case ea != nil || eb != nil:
		return 0 // no place: keep the selection's order
	case pa < pb:
		return -1
	case pa > pb:
		return 1
	}
	return 0
}

// orderChain passes the entries of one sequence one at a time, in the
// order they joined it.
type orderChain struct {
	mu   sync.Mutex
	tail map[string]chan struct{} // closed when the sequence's last joined entry is done
}

// orderTurn is one entry's place in its chain.
type orderTurn struct {
	prev <-chan struct{} // nil: first, or no sequence
	mine chan struct{}   // nil: no sequence
	once sync.Once
}

// join takes e's turn (in the order entries are to start); nil when e has
// no sequence.
func (c *orderChain) join(e *entry.Entry) *orderTurn {
	o := orderKey(e)
	if o == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tail == nil {
		c.tail = map[string]chan struct{}{}
	}
	t := &orderTurn{prev: c.tail[o], mine: make(chan struct{})}
	c.tail[o] = t.mine
	return t
}

// wait blocks until the entry before t in its sequence is done.
func (t *orderTurn) wait(ctx context.Context) error {
	if t == nil || t.prev == nil {
		return ctx.Err()
	}
	select {
	case <-t.prev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// done lets the next entry of the sequence go (idempotent).
func (t *orderTurn) done() {
	if t != nil {
		t.once.Do(func() { close(t.mine) })
	}
}
