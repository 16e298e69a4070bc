package runs_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/runs"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func openBolt(t *testing.T) *bolt.Bolt {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "replayctl.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A run's progress is in the store: counts, rate and ETA from the injected
// clock, written every Every, and final on Finish.
func TestRunProgressIsStored(t *testing.T) {
	st := openBolt(t)
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	tr, _, err := runs.Start(ctx, st, runs.Options{Op: "bulk-replay", Actor: "alice", Total: 10, Now: clk.now, Every: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got, err := runs.Get(ctx, st, tr.ID())
	if err != nil || got.State != runs.Running || got.Total != 10 || got.Actor != "alice" {
		t.Fatalf("started: %+v %v", got, err)
	}
	for _, o := range []runs.Outcome{runs.Success, runs.Success, runs.Failure, runs.Held} {
		clk.advance(500 * time.Millisecond)
		tr.Observe(ctx, o)
	}
	// 4 done in 2s: 2/s, 6 left: ETA 3s; saved at 1s and 2s.
	got, _ = runs.Get(ctx, st, tr.ID())
	if got.Done != 4 || got.Succeeded != 2 || got.Failed != 1 || got.Held != 1 || got.Rate != 2 || got.ETA != "3s" {
		t.Fatalf("progress: %+v", got)
	}
	clk.advance(100 * time.Millisecond)
	tr.Observe(ctx, runs.Other)
	if got, _ = runs.Get(ctx, st, tr.ID()); got.Done != 4 {
		t.Fatalf("saved before Every passed: %+v", got)
	}
	rec, err := tr.Finish(ctx, nil)
	if err != nil || rec.State != runs.Succeeded {
		t.Fatalf("finish: %+v %v", rec, err)
	}
	if got, _ = runs.Get(ctx, st, tr.ID()); got.Done != 5 || got.State != runs.Succeeded || got.Finished.IsZero() || got.ETA != "" {
		t.Fatalf("finished: %+v", got)
	}
	if _, err := runs.Cancel(ctx, st, tr.ID(), "bob"); !errors.Is(err, runs.ErrFinished) {
		t.Fatalf("cancel of a finished run: %v", err)
	}
	if _, err := runs.Cancel(ctx, st, "run-nope", "bob"); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("cancel of an unknown run: %v", err)
	}
	if _, err := runs.Get(ctx, st, "run-nope"); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("get of an unknown run: %v", err)
	}
}

// A cancel stored by someone else (`runs cancel ID`, the API of another
// process) reaches the run at its next progress write: its context is
// cancelled, and it finishes as cancelled, saying by whom.
func TestCancelFromTheStoreStopsTheRun(t *testing.T) {
	st := openBolt(t)
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	tr, runCtx, err := runs.Start(ctx, st, runs.Options{Op: "bulk-replay", Actor: "alice", Total: 100, Now: clk.now, Every: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tr.Observe(ctx, runs.Success)
	if _, err := runs.Cancel(ctx, st, tr.ID(), "bob"); err != nil {
		t.Fatal(err)
	}
	if runCtx.Err() != nil {
		t.Fatal("cancelled before the run looked")
	}
	clk.advance(time.Second)
	tr.Observe(ctx, runs.Success) // saves, sees the request
	if runCtx.Err() == nil {
		t.Fatal("a stored cancel did not reach the run")
	}
	// The progress write kept the request (it did not overwrite it).
	if got, _ := runs.Get(ctx, st, tr.ID()); !got.CancelRequested || got.CancelledBy != "bob" || got.Done != 2 {
		t.Fatalf("stored: %+v", got)
	}
	rec, _ := tr.Finish(ctx, runCtx.Err())
	if rec.State != runs.Cancelled || rec.CancelledBy != "bob" || rec.Error != "" {
		t.Fatalf("finished: %+v", rec)
	}
}

// Lists are newest first and bounded.
func TestListNewestFirst(t *testing.T) {
	st := openBolt(t)
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	var ids []string
	for range 3 {
		tr, _, err := runs.Start(ctx, st, runs.Options{Op: "reconcile", Now: clk.now})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tr.ID())
		clk.advance(time.Minute)
	}
	list, err := runs.List(ctx, st, 2)
	if err != nil || len(list) != 2 || list[0].ID != ids[2] || list[1].ID != ids[1] {
		t.Fatalf("list %+v %v", list, err)
	}
}
