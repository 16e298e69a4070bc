package benchmark

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// pruneRows measures `store prune` on a store of n entries, 90% of them
// closed before the cut, each with a decision record: entries removed per
// second against bare bbolt deletes of the same entry keys in the same
// batches (no archive, no index, no chain), and the file's size before,
// after the prune, and after compaction.
func pruneRows(ctx context.Context, c *Config) ([]Row, error) {
	n := c.size(1_000_000, 2_000)
	if c.PruneEntries > 0 {
		n = c.PruneEntries
	}
	rounds := c.size(3, 1)
	if c.PruneRounds > 0 {
		rounds = c.PruneRounds
	}
	c.progress(fmt.Sprintf("prune: %d entries, 90%% closed", n))
	dir, err := os.MkdirTemp(c.Dir, "prune-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	seed := filepath.Join(dir, "seed.db")
	cut, closed, err := pruneSeed(ctx, seed, n)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(seed)
	if err != nil {
		return nil, err
	}
	var prunes, bares []time.Duration
	var afterPrune, afterCompact int64
	for round := range rounds {
		ours := filepath.Join(dir, fmt.Sprintf("prune-%d.db", round))
		bare := filepath.Join(dir, fmt.Sprintf("bare-%d.db", round))
		for _, p := range []string{ours, bare} {
			if err := copyFile(seed, p); err != nil {
				return nil, err
			}
		}
		d, err := bareDeletes(bare, closed)
		if err != nil {
			return nil, err
		}
		bares = append(bares, d)
		st, err := bolt.Open(ours, store.Options{})
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		res, err := st.Prune(ctx, store.PruneOptions{Before: cut, Archive: filepath.Join(dir, fmt.Sprintf("a-%d.jsonl.gz", round))})
		prunes = append(prunes, time.Since(t0))
		st.Close()
		if err != nil {
			return nil, err
		}
		if res.Entries != len(closed) {
			return nil, fmt.Errorf("prune removed %d entries, want %d", res.Entries, len(closed))
		}
		if _, err := os.Stat(ours); err == nil {
			fo, _ := os.Stat(ours)
			afterPrune = fo.Size()
		}
		if round == 0 {
			if _, afterCompact, err = bolt.Compact(ours, ours+".compact"); err != nil {
				return nil, err
			}
		}
		os.Remove(ours)
		os.Remove(bare)
	}
	p, b := medianDuration(prunes), medianDuration(bares)
	mb := func(x int64) float64 { return float64(x) / (1 << 20) }
	return []Row{
		{Measure: fmt.Sprintf("prune, %d entries (90%% closed), archive included (entries/s)", n), Figure: rate(len(closed), p), Unit: "/s",
			Baseline: rate(len(closed), b), Ratio: b.Seconds() / p.Seconds(), Note: "of bare bbolt deletes of the same keys, same batches"},
		{Measure: fmt.Sprintf("store size after prune, %d entries (90%% closed)", n), Figure: mb(afterPrune), Unit: "MB",
			Baseline: mb(fi.Size()), Ratio: float64(afterPrune) / float64(fi.Size()), Note: "of the size before (bbolt keeps its free pages for reuse)"},
		{Measure: fmt.Sprintf("store size after prune and compaction, %d entries (90%% closed)", n), Figure: mb(afterCompact), Unit: "MB",
			Baseline: mb(fi.Size()), Ratio: float64(afterCompact) / float64(fi.Size()), Note: "of the size before (bolt.Compact, as bbolt compact)"},
	}, nil
}

// pruneSeed writes n entries, every tenth open, the others replayed, each
// with a decision record, all before the cut it returns with the closed refs.
func pruneSeed(ctx context.Context, path string, n int) (time.Time, []string, error) {
	st, err := bolt.Open(path, store.Options{})
	if err != nil {
		return time.Time{}, nil, err
	}
	defer st.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var closed []string
	const per = 1000
	for i := 0; i < n; i += per {
		err := st.Update(ctx, func(tx store.Tx) error {
			for j := i; j < min(i+per, n); j++ {
				// Open entries after the closed ones in the chain: the
				// prefix of the chain before them is pruned too.
				open := j >= n-n/10
				status := store.StatusReplayed
				if open {
					status = store.StatusQuarantined
				}
				at := t0.Add(time.Duration(j) * time.Second)
				e := entry.Entry{ID: fmt.Sprintf("e%07d", j), Source: jsonl.Kind, Topic: "tool.email.send", ReasonCode: "timeout",
					Message: "smtp relay timed out after 30s", IdempotencyKey: fmt.Sprintf("k%07d", j),
					Payload: []byte(fmt.Sprintf(`{"to":"user%d@example.com","n":%d}`, j, j)), FirstFailure: at}
				if err := tx.PutEntry(&store.EntryRecord{Entry: e, Status: status, FirstSeen: at, LastSeen: at}); err != nil {
					return err
				}
				if _, err := tx.Append(&audit.Record{Time: at, Actor: "bench", Kind: audit.KindDecision, EntryRef: e.Ref()}); err != nil {
					return err
				}
				if !open {
					closed = append(closed, e.Ref())
				}
			}
			return nil
		})
		if err != nil {
			return time.Time{}, nil, err
		}
	}
	return t0.Add(time.Duration(n+1) * time.Second), closed, nil
}

// bareDeletes deletes the entry keys from the entries bucket, per of them
// to a transaction: the floor under prune's removals.
func bareDeletes(path string, refs []string) (time.Duration, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	t0 := time.Now()
	for i := 0; i < len(refs); i += store.DefaultPruneBatch {
		err := db.Update(func(tx *bbolt.Tx) error {
			b := tx.Bucket([]byte("entries"))
			for _, r := range refs[i:min(i+store.DefaultPruneBatch, len(refs))] {
				if err := b.Delete([]byte(r)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
}

// copyFile copies a store file without holding it in memory (a 1M-entry
// store is about a gigabyte).
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
