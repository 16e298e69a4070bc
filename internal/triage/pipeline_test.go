package triage

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
)

// stream yields n entries named e0, e1, ... and counts what it yielded.
func stream(n int, yielded *atomic.Int64, after func(ctx context.Context, i int) error) func(context.Context) iter.Seq2[entry.Entry, error] {
	return func(ctx context.Context) iter.Seq2[entry.Entry, error] {
		return func(yield func(entry.Entry, error) bool) {
			for i := range n {
				if after != nil {
					if err := after(ctx, i); err != nil {
						yield(entry.Entry{}, err)
						return
					}
				}
				if yielded != nil {
					yielded.Add(1)
				}
				if !yield(entry.Entry{ID: fmt.Sprint("e", i)}, nil) {
					return
				}
			}
		}
	}
}

// echo decides by copying the entry's id, after work that differs from
// entry to entry so that batches finish out of order.
func echo(_ context.Context, e *entry.Entry) (Decision, error) {
	x := 0
	for i := range (len(e.ID) * 7919) % 50_000 {
		x += i
	}
	return Decision{EntryID: e.ID, MaxReplays: x & 1}, nil
}

func TestPipelineKeepsInputOrderWithBoundedMemory(t *testing.T) {
	const n, workers = 5000, 4
	var yielded, emitted atomic.Int64
	// Everything in flight: the order queue, the batch being emitted, the
	// one being read and the one waiting to be queued.
	bound := int64((2*workers + 3) * pipelineBatch)
	p := &Pipeline{Workers: workers, Decide: echo}
	i := 0
	err := p.Run(context.Background(), stream(n, &yielded, func(context.Context, int) error {
		if ahead := yielded.Load() - emitted.Load(); ahead > bound {
			return fmt.Errorf("the reader ran %d entries ahead of the output (bound %d)", ahead, bound)
		}
		return nil
	}), func(e *entry.Entry, d *Decision) error {
		if want := fmt.Sprint("e", i); e.ID != want || d.EntryID != want {
			return fmt.Errorf("output %d: entry %s decision %s, want %s", i, e.ID, d.EntryID, want)
		}
		i++
		emitted.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if i != n {
		t.Fatalf("emitted %d of %d", i, n)
	}
}

// Run must decide on several goroutines at once: the first entry of each
// of the first batches waits until all the workers are deciding. Run one at
// a time, it would never get there.
func TestPipelineDecidesOnEveryWorker(t *testing.T) {
	const workers = 3
	var inside atomic.Int64
	all := make(chan struct{})
	p := &Pipeline{Workers: workers, Decide: func(ctx context.Context, e *entry.Entry) (Decision, error) {
		var k int
		fmt.Sscanf(e.ID, "e%d", &k)
		if k%pipelineBatch == 0 && k < workers*pipelineBatch {
			if inside.Add(1) == workers {
				close(all)
			}
			select {
			case <-all:
			case <-time.After(30 * time.Second): // a guard against hanging, not a timing assertion
				return Decision{}, errors.New("the workers never decided at the same time")
			}
		}
		return Decision{EntryID: e.ID}, nil
	}}
	if err := p.Run(context.Background(), stream(workers*pipelineBatch, nil, nil), func(*entry.Entry, *Decision) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestPipelineErrorsComeInOrder(t *testing.T) {
	errStream, errDecide, errEmit := errors.New("stream broke"), errors.New("decide broke"), errors.New("emit broke")
	cases := []struct {
		name    string
		after   func(context.Context, int) error
		decide  func(context.Context, *entry.Entry) (Decision, error)
		emitErr int // the output index at which emit fails, -1 never
		want    error
		emitted int
	}{
		{"stream error after 150 entries", func(_ context.Context, i int) error {
			if i == 150 {
				return errStream
			}
			return nil
		}, echo, -1, errStream, 150},
		{"decide error at entry 200", nil, func(ctx context.Context, e *entry.Entry) (Decision, error) {
			if e.ID == "e200" {
				return Decision{}, errDecide
			}
			return echo(ctx, e)
		}, -1, errDecide, 200},
		{"emit error at entry 70", nil, echo, 70, errEmit, 70},
		// The stream is opened with Run's context: a source blocked on
		// the network is released when emit gives up.
		{"emit error while the stream blocks", func(ctx context.Context, i int) error {
			if i == 100 {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}, echo, 5, errEmit, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			emitted := 0
			p := &Pipeline{Workers: 2, Decide: c.decide}
			err := p.Run(context.Background(), stream(1000, nil, c.after), func(e *entry.Entry, d *Decision) error {
				if emitted == c.emitErr {
					return errEmit
				}
				if want := fmt.Sprint("e", emitted); e.ID != want {
					t.Fatalf("output %d is %s", emitted, e.ID)
				}
				emitted++
				return nil
			})
			if !errors.Is(err, c.want) || emitted != c.emitted {
				t.Errorf("err %v after %d emitted, want %v after %d", err, emitted, c.want, c.emitted)
			}
		})
	}
}

// Each gives every index to exactly one call, whatever the number of
// workers (a replay window decides its entries with it).
func TestPipelineEachCallsEveryIndexOnce(t *testing.T) {
	for _, workers := range []int{0, 1, 3, 200} {
		var calls [100]atomic.Int32
		(&Pipeline{Workers: workers}).Each(len(calls), func(i int) { calls[i].Add(1) })
		for i := range calls {
			if n := calls[i].Load(); n != 1 {
				t.Fatalf("workers %d: index %d called %d times", workers, i, n)
			}
		}
	}
	(&Pipeline{}).Each(0, func(int) { t.Fatal("called for an empty batch") })
}
