package replay

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
)

func seqEntry(seq string, pos int) *entry.Entry {
	return &entry.Entry{ID: fmt.Sprint(seq, pos), Labels: map[string]string{entry.OrderLabel: seq, entry.OrderPosLabel: fmt.Sprint(pos)}}
}

// An orderChain lets a sequence's entries pass one at a time in the order
// they joined, whatever order their workers reach it in; another
// sequence's entries do not wait for them, and entries without one never
// wait.
func TestOrderChainPassesInJoinOrder(t *testing.T) {
	ctx := context.Background()
	var c orderChain
	const n = 20
	turns := make([]*orderTurn, n)
	for i := range turns {
		turns[i] = c.join(seqEntry("kafka:orders/0", i))
	}
	other := c.join(seqEntry("kafka:orders/1", 0))
	if err := other.wait(ctx); err != nil { // its own sequence's first: no wait
		t.Fatal(err)
	}
	if free := c.join(&entry.Entry{ID: "x"}); free != nil || free.wait(ctx) != nil {
		t.Fatal("an entry without a sequence waits")
	}
	var mu sync.Mutex
	var passed []int
	var wg sync.WaitGroup
	for i := n - 1; i >= 0; i-- { // the workers arrive last first
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := turns[i].wait(ctx); err != nil {
				t.Error(err)
			}
			mu.Lock()
			passed = append(passed, i)
			mu.Unlock()
			turns[i].done()
			turns[i].done() // idempotent
		}()
	}
	wg.Wait()
	for i := range n {
		if passed[i] != i {
			t.Fatalf("passed in the order %v, want the join order", passed)
		}
	}
	// A wait ends with its context.
	late := c.join(seqEntry("kafka:orders/1", 1))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if late.wait(cctx) == nil {
		t.Error("a wait behind an entry not done returned without its context ending")
	}
}

// orderSequences puts a sequence's entries in the slots they hold in
// offset order (a ref sorts offset 10 before 9); the others stay.
func TestOrderSequencesSortsByPlace(t *testing.T) {
	var sel []*store.EntryRecord
	for _, e := range []*entry.Entry{seqEntry("a", 10), {ID: "free"}, seqEntry("a", 9), seqEntry("b", 2), seqEntry("a", 100), seqEntry("b", 1)} {
		sel = append(sel, &store.EntryRecord{Entry: *e})
	}
	orderSequences(sel)
	var got []string
	for _, er := range sel {
		got = append(got, er.Entry.ID)
	}
	if want := []string{"a9", "free", "a10", "b1", "a100", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
