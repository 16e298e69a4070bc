package runs_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/runs"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testsvc.Stop()
	os.Exit(code)
}

// With PostgreSQL, another process (here: another connection pool on the
// same database) follows a run and cancels it while it goes on; the run
// sees the cancel at its next progress write.
func TestPostgresRunFollowedAndCancelledElsewhere(t *testing.T) {
	dsn := testsvc.Postgres(t)
	ctx := context.Background()
	open := func() *postgres.Postgres {
		p, err := postgres.Open(ctx, dsn, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	worker, operator := open(), open()
	clk := &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	tr, runCtx, err := runs.Start(ctx, worker, runs.Options{Op: "bulk-replay", Actor: "alice", Total: 50, Now: clk.now, Every: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clk.advance(time.Second)
		tr.Observe(ctx, runs.Success)
	}
	list, err := runs.List(ctx, operator, 10)
	if err != nil || len(list) != 1 || list[0].ID != tr.ID() || list[0].Done != 3 || list[0].State != runs.Running {
		t.Fatalf("list from elsewhere: %+v %v", list, err)
	}
	if _, err := runs.Cancel(ctx, operator, tr.ID(), "bob"); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Second)
	tr.Observe(ctx, runs.Failure)
	if runCtx.Err() == nil {
		t.Fatal("the cancel from elsewhere did not reach the run")
	}
	if _, err := tr.Finish(ctx, runCtx.Err()); err != nil {
		t.Fatal(err)
	}
	got, err := runs.Get(ctx, operator, tr.ID())
	if err != nil || got.State != runs.Cancelled || got.CancelledBy != "bob" || got.Done != 4 || got.Failed != 1 {
		t.Fatalf("seen from elsewhere: %+v %v", got, err)
	}
}
