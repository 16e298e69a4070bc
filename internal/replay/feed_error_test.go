package replay

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
)

// failAfter is a source whose read fails after its first n entries (a
// file cut short, a broker gone).
type failAfter struct {
	source.Source
	n int
}

var errSourceGone = errors.New("source gone mid-read")

func (s failAfter) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		i := 0
		for e, err := range s.Source.Entries(ctx) {
			if i == s.n {
				yield(entry.Entry{}, errSourceGone)
				return
			}
			if !yield(e, err) {
				return
			}
			i++
		}
	}
}

// TestSourceFailingMidRunOnWindows: on bbolt the feed reads ahead of the
// windows on a goroutine of its own; a source whose read fails after some
// entries still fails the run with its error, after every entry read
// before it was handled (each replayed once), and a second run over the
// whole source replays only the rest.
func TestSourceFailingMidRunOnWindows(t *testing.T) {
	b := newBundle(t, baseRules)
	var entries []map[string]any
	for i := range 40 {
		entries = append(entries, transient(fmt.Sprintf("f%02d", i), fmt.Sprintf("fk%02d", i)))
	}
	src := b.jsonl("dlq.jsonl", entries...)
	rep, err := b.reconciler(4).Run(context.Background(), []source.Source{failAfter{Source: src, n: 25}})
	if !errors.Is(err, errSourceGone) || !strings.Contains(err.Error(), "source ") {
		t.Fatalf("run over a failing source: %v (report %+v)", err, rep)
	}
	if got := len(b.sink.perKey()); got != 25 {
		t.Fatalf("%d keys delivered before the source failed, want 25", got)
	}
	b.run(b.reconciler(4), src)
	for k, n := range b.sink.perKey() {
		if n != 1 {
			t.Fatalf("%s sent %d times", k, n)
		}
	}
	if got := len(b.sink.perKey()); got != 40 {
		t.Fatalf("%d keys delivered in all, want 40", got)
	}
}

// panicAfter is a source whose reader panics after its first n entries.
type panicAfter struct {
	source.Source
	n int
}

func (s panicAfter) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		i := 0
		for e, err := range s.Source.Entries(ctx) {
			if i == s.n {
				panic("reader bug")
			}
			if !yield(e, err) {
				return
			}
			i++
		}
	}
}

// TestSourcePanicReachesRunsCaller: a source's panic, now raised on the
// feed's own goroutine, reaches Run's caller as it did when the feed ran
// on the loop (iter.Pull), instead of killing the process from a
// goroutine no one can recover.
func TestSourcePanicReachesRunsCaller(t *testing.T) {
	b := newBundle(t, baseRules)
	src := b.jsonl("dlq.jsonl", transient("p1", "pk1"), transient("p2", "pk2"), transient("p3", "pk3"))
	got := func() (p any) {
		defer func() { p = recover() }()
		_, _ = b.reconciler(1).Run(context.Background(), []source.Source{panicAfter{Source: src, n: 2}})
		return nil
	}()
	if got != "reader bug" {
		t.Fatalf("Run's caller recovered %v, want the source's panic", got)
	}
}
