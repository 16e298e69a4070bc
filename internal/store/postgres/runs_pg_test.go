package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// TestRunsTableCreatedByTwoWorkersAtOnce: two workers started together on
// a fresh PostgreSQL database both record their run first thing, and both
// create the runs table on that first use. CREATE TABLE IF NOT EXISTS is
// not atomic in PostgreSQL: the loser got "duplicate key value violates
// unique constraint pg_type_typname_nsp_index" and its reconcile failed
// (found running two `reconcile --store` at once by hand). Each round is a
// fresh table; every writer must succeed.
func TestRunsTableCreatedByTwoWorkersAtOnce(t *testing.T) {
	dsn := testsvc.Postgres(t)
	const workers = 6
	ps := make([]*Postgres, workers)
	for i := range ps {
		ps[i] = openPG(t, dsn, store.Options{})
	}
	ctx := context.Background()
	for round := range 15 {
		if _, err := ps[0].pool.Exec(ctx, `DROP TABLE IF EXISTS runs`); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, workers)
		for i, p := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = p.PutRun(ctx, fmt.Sprintf("run-%d-%d", round, i), []byte(`{}`))
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, worker %d: %v", round, i, err)
			}
		}
	}
}
