package replay_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// crashChildReplays is the child of TestCrashSingleAndBulkReplaysSurviveSIGKILL:
// it stores the source's entries it has not seen (as ingest does), then
// replays them one by one as `dlq replay ID` / the API would, or in one
// bulk replay. Every path goes through the same claim as a run.
func crashChildReplays(t *testing.T, r *replay.Reconciler, st *bolt.Bolt, src source.Source, mode string) {
	ctx := context.Background()
	var refs []string
	if err := st.Update(ctx, func(tx store.Tx) error {
		refs = refs[:0]
		for e, err := range src.Entries(ctx) {
			if err != nil {
				return err
			}
			refs = append(refs, e.Ref())
			if cur, err := tx.Entry(e.Ref()); err != nil || cur != nil {
				if err != nil {
					return err
				}
				continue
			}
			if err := tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusPending}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if mode == "bulk" {
		b := &replay.Bulk{Reconciler: r, Inventory: st, Max: 10000}
		if _, err := b.ExecuteReplay(ctx, replay.BulkFilter{All: true}); err != nil {
			t.Fatal(err)
		}
		return
	}
	work := make(chan string)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ref := range work {
				er, err := replay.Find(ctx, st, ref)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := r.One(ctx, er); err != nil && !errors.Is(err, replay.ErrState) {
					t.Error(err)
				}
			}
		}()
	}
	for _, ref := range refs {
		work <- ref
	}
	close(work)
	wg.Wait()
}

// TestCrashSingleAndBulkReplaysSurviveSIGKILL extends the kill suite to
// the single and bulk replay paths (issue 14): SIGKILL while `dlq replay
// ID`-style and bulk replays are in flight, alternating, then a plain
// reconcile; the same invariants as for runs hold (no key twice without an
// outcome_unknown record, no entry lost, no dispatching record left).
// REPLAYCTL_CRASH_REPLAY_KILLS sets the number of kills (default 6).
func TestCrashSingleAndBulkReplaysSurviveSIGKILL(t *testing.T) {
	minKills := 6
	if s := os.Getenv("REPLAYCTL_CRASH_REPLAY_KILLS"); s != "" {
		minKills, _ = strconv.Atoi(s)
	}
	paths := newCrashPaths(t)
	// Each kill finishes some entries; enough of them that every child
	// still finds work to be killed in.
	entries := makeCrashEntries(max(120, 25*minKills), 16)
	rng := rand.New(rand.NewPCG(20261123, 14))
	sink := newCrashSink(t, rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())))
	kills, midDispatch := 0, 0
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; kills < minKills; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d kills before the deadline", kills, minKills)
		}
		mode := [...]string{"single", "bulk"}[i%2]
		writeCrashSource(t, paths.source, entries, rng)
		c := startCrashChildMode(t, mode, paths.db, paths.source, sink.srv.URL)
		select {
		case <-c.out.dispatch:
		case err := <-c.done:
			if err != nil {
				t.Fatalf("%s child failed on its own: %v\n%s", mode, err, c.out)
			}
			t.Fatalf("%s child finished without dispatching after %d kills: too few entries", mode, kills)
		}
		// The kill's moment, 5-45ms into the child's dispatching (a real
		// process: no injected clock reaches it).
		<-time.After(time.Duration(5+rng.IntN(40)) * time.Millisecond)
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		switch err := <-c.done; {
		case err == nil:
		case killedBySIGKILL(err):
			kills++
			midDispatch++
		default:
			t.Fatalf("%s child failed on its own: %v\n%s", mode, err, c.out)
		}
	}
	for run := 0; run < 2; run++ {
		writeCrashSource(t, paths.source, entries, rng)
		c := startCrashChild(t, paths.db, paths.source, sink.srv.URL)
		if err := <-c.done; err != nil {
			t.Fatalf("final reconcile run: %v\n%s", err, c.out)
		}
	}
	delivered := sink.stop()
	st, err := bolt.Open(paths.db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := checkCrashRun(t, st, entries, delivered)
	t.Logf("%d SIGKILLs during single/bulk replays (%d after a dispatch began); ledger: %d succeeded, %d outcome_unknown (%d recovery records)",
		kills, midDispatch, f.succeeded, f.unknown, f.recoveries)
}
