package postgres_test

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
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/store/storetest"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// openPGPrune opens a keyed PostgreSQL store on dsn.
func openPGPrune(t *testing.T, dsn string) *postgres.Postgres {
	t.Helper()
	p, err := postgres.Open(context.Background(), dsn, store.Options{AuditKey: storetest.PruneKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Issue 32 on PostgreSQL: a prune archives the closed entries before the
// cut, their ledger records and approvals and the chain's prefix, removes
// them in batches, and leaves a live chain that verifies with the key from
// its signed base, and end to end with the archive; what stays is intact,
// the counters follow, and the chain goes on.
func TestPostgresPruneArchivesAndVerifies(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := openPGPrune(t, testsvc.Postgres(t))
	fx := storetest.FillPruneStore(t, p, 30, 5, 5)
	archive := filepath.Join(dir, "prune-1.jsonl.gz")
	res, err := p.Prune(ctx, store.PruneOptions{Before: storetest.PruneCut, Archive: archive, Key: storetest.PruneKey, Batch: 7})
	if err != nil {
		t.Fatal(err)
	}
	// As on bbolt (TestPruneArchivesAndVerifies): 30 closed entries before
	// the cut, 2 records each; the prefix stops at the first open entry.
	if res.Entries != 30 || res.Audit != 60 || res.Approvals != 6 || res.Ledger != 30 || res.HeldBy != fx.Open[0] || res.SizeAfter <= 0 {
		t.Fatalf("result %+v", res)
	}
	if res.Base == nil || res.Base.Seq != 60 || res.Base.MAC != audit.BaseMAC(storetest.PruneKey, 60, res.Base.Head) {
		t.Fatalf("base %+v", res.Base)
	}
	if _, err := p.Prune(ctx, store.PruneOptions{Before: storetest.PruneCut, Archive: archive, Key: storetest.PruneKey}); !errors.Is(err, store.ErrArchiveExists) {
		t.Fatalf("second prune into the same archive: %v", err)
	}
	again := filepath.Join(dir, "prune-2.jsonl.gz")
	if res, err := p.Prune(ctx, store.PruneOptions{Before: storetest.PruneCut, Archive: again, Key: storetest.PruneKey}); err != nil || res.Entries+res.Audit != 0 {
		t.Fatalf("second prune: %+v %v", res, err)
	}
	if _, err := os.Stat(again); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an empty prune wrote %s", again)
	}
	live := storetest.CheckPrunedStore(t, p, []string{archive}, fx)
	for _, ref := range fx.ClosedOld {
		if live[ref] {
			t.Errorf("%s was not pruned", ref)
		}
	}
	// The rows are gone, not hidden: the audit table holds only the live
	// chain, the approvals of the entries that stay are all that is left.
	n := 0
	if err := p.Approvals(ctx, func(a *store.Approval) error { n++; return nil }); err != nil || n != 2 {
		t.Fatalf("%d approvals left (%v), want 2 (the open and the recent entries')", n, err)
	}
	if seqs, err := p.AuditSeqs(ctx, store.AuditFilter{Kind: audit.KindDecision}); err != nil || len(seqs) != 10 || seqs[0] != 61 {
		t.Fatalf("decision records left: %v %v", seqs, err)
	}
	c, err := p.Counters(ctx)
	if err != nil || c.Entries != 10 {
		t.Fatalf("counters after the prune: %+v %v", c, err)
	}
	// The chain goes on after a prune, and verifies with the key.
	if err := p.Update(ctx, func(tx store.Tx) error {
		_, err := tx.Append(&audit.Record{Time: storetest.PruneCut, Actor: "test", Kind: audit.KindBulk})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	storetest.CheckPrunedStore(t, p, []string{archive}, fx)
	// Another key does not sign this base.
	if res3, err := audit.VerifyWith(ctx, p, audit.VerifyOptions{Key: []byte("other")}); err != nil || res3.OK() {
		t.Fatalf("verify with another key: %+v %v", res3, err)
	}
	if res4, err := audit.VerifyArchived(ctx, nil, p, audit.VerifyOptions{Key: storetest.PruneKey}); err != nil || res4.OK() || !strings.Contains(res4.Break.Reason, "an archive is missing") {
		t.Fatalf("verify without the archive: %+v %v", res4, err)
	}
}

// A closed entry that was active after the cut (an audit record about it
// written since) stays, and so does a closed entry owing its source a
// write-back; the chain's prefix stops at the first record of one.
func TestPostgresPruneKeepsRecentAndOwedEntries(t *testing.T) {
	ctx := context.Background()
	p := openPGPrune(t, testsvc.Postgres(t))
	fx := storetest.FillPruneStore(t, p, 4, 0, 0)
	owed, touched := fx.ClosedOld[1], fx.ClosedOld[3]
	if err := p.Update(ctx, func(tx store.Tx) error {
		er, err := tx.Entry(owed)
		if err != nil {
			return err
		}
		er.WriteBackPending = store.WriteBackReplayed
		if err := tx.PutEntry(er); err != nil {
			return err
		}
		_, err = tx.Append(&audit.Record{Time: storetest.PruneCut.Add(time.Hour), Actor: "alice", Kind: audit.KindResolve, EntryRef: touched})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	res, err := p.Prune(ctx, store.PruneOptions{Before: storetest.PruneCut, Archive: filepath.Join(t.TempDir(), "a.jsonl.gz"), Key: storetest.PruneKey})
	if err != nil || res.Entries != 2 || res.HeldBy != owed || res.Audit != 2 {
		t.Fatalf("prune: %+v %v", res, err)
	}
	if live := storetest.LiveRefs(t, p); !live[owed] || !live[touched] || len(live) != 2 {
		t.Fatalf("live %v, want %s and %s", live, owed, touched)
	}
}

// A chain that does not verify is neither archived nor cut.
func TestPostgresPruneRefusesABrokenChain(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	p := openPGPrune(t, dsn)
	storetest.FillPruneStore(t, p, 4, 0, 0)
	if _, err := p.SealAudit(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := postgres.TamperPGAuditForTest(ctx, p, 3); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "a.jsonl.gz")
	if _, err := p.Prune(ctx, store.PruneOptions{Before: storetest.PruneCut, Archive: archive, Key: storetest.PruneKey}); err == nil || !strings.Contains(err.Error(), "nothing was pruned") {
		t.Fatalf("prune of a broken chain: %v", err)
	}
	if _, err := os.Stat(archive); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("an archive was written from a broken chain")
	}
	if n := len(storetest.LiveRefs(t, p)); n != 4 {
		t.Fatalf("%d entries left, want 4", n)
	}
}

const (
	pgPruneChildEnv = "REPLAYCTL_PG_PRUNE_CHILD"
	markBaseMoved   = "prune-child: base moved"
)

// TestPostgresPruneChild is the process TestPostgresPruneSurvivesSIGKILL
// kills: it prunes one row per transaction (Batch 1).
func TestPostgresPruneChild(t *testing.T) {
	dsn := os.Getenv(pgPruneChildEnv)
	if dsn == "" {
		t.Skip("run by TestPostgresPruneSurvivesSIGKILL")
	}
	p, err := postgres.Open(context.Background(), dsn, store.Options{AuditKey: storetest.PruneKey})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("prune-child: ready")
	_, err = p.Prune(context.Background(), store.PruneOptions{Before: storetest.PruneCut, Archive: os.Getenv(storetest.PruneArchiveEnv), Key: storetest.PruneKey, Batch: 1,
		AfterArchive: func() { fmt.Println(storetest.MarkArchived) }, AfterBase: func() { fmt.Println(markBaseMoved) }})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
}

// TestPostgresPruneSurvivesSIGKILL kills a PostgreSQL prune at random
// moments (writing the archive, removing entries, moving the base and
// removing the chain's prefix: the server rolls back the transaction the
// kill cut) and checks after each kill that nothing was lost and that the
// chain verifies, live and with the archive; a prune run again finishes.
func TestPostgresPruneSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 33))
	child := func(dsn, archive, mark string, delay time.Duration) (time.Duration, bool) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPostgresPruneChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), pgPruneChildEnv+"="+dsn, storetest.PruneArchiveEnv+"="+archive)
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
	fresh := func() (string, *storetest.PruneFixture) {
		dsn := testsvc.Postgres(t)
		p, err := postgres.Open(context.Background(), dsn, store.Options{AuditKey: storetest.PruneKey})
		if err != nil {
			t.Fatal(err)
		}
		fx := storetest.FillPruneStore(t, p, 120, 10, 10)
		p.Close() // seals the chain
		return dsn, fx
	}
	dsn, _ := fresh()
	span, _ := child(dsn, filepath.Join(dir, "measure.jsonl.gz"), storetest.MarkArchived, -1)
	kills := map[string]int{}
	for round := range 6 {
		dsn, fx := fresh()
		archive := filepath.Join(dir, fmt.Sprintf("round-%d.jsonl.gz", round))
		// Kills count from the start (the archive being written), from
		// the archive's mark (entries and approvals being removed) or from
		// the base's (the chain's prefix being removed, a small part of
		// the span).
		mark, delay := storetest.MarkArchived, time.Duration(rng.Int64N(int64(span)+1))
		switch round % 3 {
		case 0:
			mark = "prune-child: ready"
		case 2:
			mark, delay = markBaseMoved, time.Duration(rng.Int64N(int64(span/8)+1))
		}
		_, killed := child(dsn, archive, mark, delay)
		phase := "finished before the kill"
		if killed {
			phase = "killed after " + mark
		}
		kills[phase]++
		p, err := postgres.Open(context.Background(), dsn, store.Options{AuditKey: storetest.PruneKey})
		if err != nil {
			t.Fatal(err)
		}
		live := storetest.CheckPrunedStore(t, p, []string{archive}, fx)
		base, err := p.AuditBase(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %s at %v of %v; %d entries live, base %+v", round, phase, delay, span, len(live), base)
		again := filepath.Join(dir, fmt.Sprintf("round-%d-again.jsonl.gz", round))
		if _, err := p.Prune(context.Background(), store.PruneOptions{Before: storetest.PruneCut, Archive: again, Key: storetest.PruneKey}); err != nil {
			t.Fatalf("round %d: prune again: %v", round, err)
		}
		live = storetest.CheckPrunedStore(t, p, []string{archive, again}, fx)
		for _, ref := range fx.ClosedOld {
			if live[ref] {
				t.Fatalf("round %d: %s still live after the prune finished", round, ref)
			}
		}
		p.Close()
	}
	t.Logf("kills: %v", kills)
}
