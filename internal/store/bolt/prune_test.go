package bolt_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/store/storetest"
)

func makePruneStore(t *testing.T, path string, closedOld, open, closedNew int) *storetest.PruneFixture {
	t.Helper()
	st, err := bolt.Open(path, store.Options{AuditKey: storetest.PruneKey})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return storetest.FillPruneStore(t, st, closedOld, open, closedNew)
}

// TestPruneKeepsOwedWriteBacks: a closed entry whose source has not yet
// been told (a failed write-back the next run retries) stays.
func TestPruneKeepsOwedWriteBacks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "replayctl.db")
	fx := makePruneStore(t, path, 3, 0, 0)
	st, err := bolt.Open(path, store.Options{AuditKey: storetest.PruneKey})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	owed := fx.ClosedOld[1]
	if err := st.Update(context.Background(), func(tx store.Tx) error {
		er, err := tx.Entry(owed)
		if err != nil {
			return err
		}
		er.WriteBackPending = store.WriteBackReplayed
		return tx.PutEntry(er)
	}); err != nil {
		t.Fatal(err)
	}
	res, err := st.Prune(context.Background(), store.PruneOptions{Before: storetest.PruneCut, Archive: filepath.Join(dir, "a.jsonl.gz"), Key: storetest.PruneKey})
	if err != nil || res.Entries != 2 || res.HeldBy != owed {
		t.Fatalf("prune: %+v %v", res, err)
	}
	if live := storetest.LiveRefs(t, st); !live[owed] || len(live) != 1 {
		t.Fatalf("live %v, want only %s", live, owed)
	}
}

// checkPruned asserts what must hold after a prune, finished or killed:
// the live chain verifies with the key (from its base); with the archive
// it verifies end to end; no entry is lost (each is live or archived);
// no open or recent entry left.
func checkPruned(t *testing.T, path string, archives []string, fx *storetest.PruneFixture) (live map[string]bool) {
	t.Helper()
	st, err := bolt.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return storetest.CheckPrunedStore(t, st, archives, fx)
}

func TestPruneArchivesAndVerifies(t *testing.T) {
	dir := t.TempDir()
	path, archive := filepath.Join(dir, "replayctl.db"), filepath.Join(dir, "prune-1.jsonl.gz")
	fx := makePruneStore(t, path, 30, 5, 5)
	st, err := bolt.Open(path, store.Options{AuditKey: storetest.PruneKey})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Prune(context.Background(), store.PruneOptions{Before: storetest.PruneCut, Archive: archive, Key: storetest.PruneKey, Batch: 7})
	if err != nil {
		t.Fatal(err)
	}
	// 30 closed entries before the cut, 2 records each; the chain's prefix
	// stops at the first open entry's record.
	if res.Entries != 30 || res.Audit != 60 || res.Approvals != 6 || res.Ledger != 30 || res.HeldBy != fx.Open[0] {
		t.Fatalf("result %+v", res)
	}
	if _, err := st.Prune(context.Background(), store.PruneOptions{Before: storetest.PruneCut, Archive: archive, Key: storetest.PruneKey}); !errors.Is(err, store.ErrArchiveExists) {
		t.Fatalf("second prune into the same archive: %v", err)
	}
	// Nothing more to prune: no archive is written.
	again := filepath.Join(dir, "prune-2.jsonl.gz")
	if res, err := st.Prune(context.Background(), store.PruneOptions{Before: storetest.PruneCut, Archive: again, Key: storetest.PruneKey}); err != nil || res.Entries+res.Audit != 0 {
		t.Fatalf("second prune: %+v %v", res, err)
	}
	if _, err := os.Stat(again); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an empty prune wrote %s", again)
	}
	// The chain goes on after a prune, and verifies.
	if err := st.Update(context.Background(), func(tx store.Tx) error {
		_, err := tx.Append(&audit.Record{Time: storetest.PruneCut, Actor: "test", Kind: audit.KindBulk})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	base, err := st.AuditBase(context.Background())
	if err != nil || base == nil || base.Seq != 60 {
		t.Fatalf("base %+v %v", base, err)
	}
	st.Close()
	live := checkPruned(t, path, []string{archive}, fx)
	for _, ref := range fx.ClosedOld {
		if live[ref] {
			t.Errorf("%s was not pruned", ref)
		}
	}

	ro, err := bolt.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	// Without the key the base is taken on trust, and the result says so.
	res2, err := audit.VerifyWith(context.Background(), ro, audit.VerifyOptions{})
	if err != nil || !res2.OK() || res2.Pruned == nil || !strings.Contains(strings.Join(res2.Unchecked, "\n"), "pruned base") {
		t.Fatalf("verify without key: %+v %v", res2, err)
	}
	// Another key does not sign this base.
	if res3, err := audit.VerifyWith(context.Background(), ro, audit.VerifyOptions{Key: []byte("other")}); err != nil || res3.OK() {
		t.Fatalf("verify with another key: %+v %v", res3, err)
	}
	// An archive left out is a gap.
	if res4, err := audit.VerifyArchived(context.Background(), nil, ro, audit.VerifyOptions{Key: storetest.PruneKey}); err != nil || res4.OK() || !strings.Contains(res4.Break.Reason, "an archive is missing") {
		t.Fatalf("verify without the archive: %+v %v", res4, err)
	}
}

// TestPruneRefusesABrokenChain: a chain that does not verify is not
// archived or cut.
func TestPruneRefusesABrokenChain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "replayctl.db")
	makePruneStore(t, path, 4, 0, 0)
	st, err := bolt.Open(path, store.Options{AuditKey: storetest.PruneKey})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := bolt.TamperAuditForTest(st, 3); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "a.jsonl.gz")
	if _, err := st.Prune(context.Background(), store.PruneOptions{Before: storetest.PruneCut, Archive: archive, Key: storetest.PruneKey}); err == nil || !strings.Contains(err.Error(), "nothing was pruned") {
		t.Fatalf("prune of a broken chain: %v", err)
	}
	if _, err := os.Stat(archive); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("an archive was written from a broken chain")
	}
	if n := len(storetest.LiveRefs(t, st)); n != 4 {
		t.Fatalf("%d entries left, want 4", n)
	}
}

const pruneChildEnv = "REPLAYCTL_PRUNE_CHILD"

// TestPruneChild is the process TestPruneSurvivesSIGKILL kills: it prunes
// one transaction per record (Batch 1), so a kill lands in the middle.
func TestPruneChild(t *testing.T) {
	path := os.Getenv(pruneChildEnv)
	if path == "" {
		t.Skip("run by TestPruneSurvivesSIGKILL")
	}
	st, err := bolt.Open(path, store.Options{AuditKey: storetest.PruneKey})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("prune-child: ready")
	_, err = st.Prune(context.Background(), store.PruneOptions{Before: storetest.PruneCut, Archive: os.Getenv(storetest.PruneArchiveEnv), Key: storetest.PruneKey, Batch: 1,
		AfterArchive: func() { fmt.Println(storetest.MarkArchived) }})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
}

// TestPruneSurvivesSIGKILL kills a prune at random moments (while it
// writes the archive, while it removes entries, while it moves the base
// and removes the chain's prefix) and checks after each kill that nothing
// was lost and that the chain verifies, live and with the archive; then a
// prune run again finishes the job.
func TestPruneSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed.db")
	fx := makePruneStore(t, seed, 300, 20, 20)
	data, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 32))
	// child runs a prune on a copy of the seed and kills it delay after
	// its mark (never, for a negative delay); it returns how long the
	// child ran past the mark and whether it was killed.
	child := func(path, archive, mark string, delay time.Duration) (time.Duration, bool) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestPruneChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), pruneChildEnv+"="+path, storetest.PruneArchiveEnv+"="+archive)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() && !strings.Contains(sc.Text(), mark) {
		}
		t0 := time.Now()
		go io.Copy(io.Discard, out)
		if delay >= 0 {
			time.Sleep(delay)
			_ = cmd.Process.Kill()
		}
		werr := cmd.Wait()
		if delay < 0 && werr != nil {
			t.Fatalf("unkilled prune child: %v", werr)
		}
		return time.Since(t0), werr != nil
	}
	// How long the removals take here: the kills are spread over them.
	span, _ := child(filepath.Join(dir, "measure.db"), filepath.Join(dir, "measure.jsonl.gz"), storetest.MarkArchived, -1)
	kills := map[string]int{}
	for round := range 10 {
		path := filepath.Join(dir, fmt.Sprintf("round-%d.db", round))
		archive := filepath.Join(dir, fmt.Sprintf("round-%d.jsonl.gz", round))
		// A few kills count from the start (the archive being written),
		// the others from the archive's mark (removals under way).
		mark := storetest.MarkArchived
		if round%4 == 0 {
			mark = "prune-child: ready"
		}
		delay := time.Duration(rng.Int64N(int64(span) + 1))
		_, killed := child(path, archive, mark, delay)
		phase := "finished before the kill"
		if killed {
			phase = "killed after " + mark
		}
		kills[phase]++
		live := checkPruned(t, path, []string{archive}, fx)
		st, err := bolt.Open(path, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		base, err := st.AuditBase(context.Background())
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %s at %v of %v; %d entries live, base %+v", round, phase, delay, span, len(live), base)

		// A prune run again finishes (or, with no archive yet, starts).
		rw, err := bolt.Open(path, store.Options{AuditKey: storetest.PruneKey})
		if err != nil {
			t.Fatal(err)
		}
		again := filepath.Join(dir, fmt.Sprintf("round-%d-again.jsonl.gz", round))
		if _, err := rw.Prune(context.Background(), store.PruneOptions{Before: storetest.PruneCut, Archive: again, Key: storetest.PruneKey}); err != nil {
			t.Fatalf("round %d: prune again: %v", round, err)
		}
		rw.Close()
		live = checkPruned(t, path, []string{archive, again}, fx)
		for _, ref := range fx.ClosedOld {
			if live[ref] {
				t.Fatalf("round %d: %s still live after the prune finished", round, ref)
			}
		}
	}
	t.Logf("kills: %v", kills)
}

// TestPruneKeepsTheHead: with every entry closed before the cut, the chain
// is pruned up to, not including, its last record, which the next append
// links to; the live chain verifies before and after that append.
func TestPruneKeepsTheHead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "replayctl.db")
	fx := makePruneStore(t, path, 6, 0, 0)
	st, err := bolt.Open(path, store.Options{AuditKey: storetest.PruneKey})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	archive := filepath.Join(dir, "a.jsonl.gz")
	res, err := st.Prune(context.Background(), store.PruneOptions{Before: storetest.PruneCut, Archive: archive, Key: storetest.PruneKey})
	if err != nil || res.Entries != 6 || res.Audit != 11 || res.Base.Seq != 11 {
		t.Fatalf("prune: %+v %v", res, err)
	}
	if err := st.Update(context.Background(), func(tx store.Tx) error {
		_, err := tx.Append(&audit.Record{Time: storetest.PruneCut, Actor: "test", Kind: audit.KindBulk})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	checkPruned(t, path, []string{archive}, fx)
}
