package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// size reconciles a generated corpus (mixed classes: replays with their
// decision, dispatch and outcome records, quarantines, approvals and
// manual reviews) against a local sink and compares the store file's size
// with the corpus file's: the bytes a user's DLQ costs on disk once
// replayctl has decided on and acted on it.
func size(ctx context.Context, c *Config) ([]Row, error) {
	n := c.size(10_000, 300)
	c.progress(fmt.Sprintf("store size: reconcile %d entries", n))
	path, db, err := sizeRun(ctx, c, n, true)
	if err != nil {
		return nil, err
	}
	in, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	out, err := os.Stat(db)
	if err != nil {
		return nil, err
	}
	return []Row{{Measure: fmt.Sprintf("store bytes per input byte after reconcile, %d entries", n),
		Figure: float64(out.Size()) / float64(n), Unit: "B/entry", Baseline: float64(in.Size()) / float64(n),
		Ratio: float64(out.Size()) / float64(in.Size()), Note: "of the input file's bytes (bbolt file after reconcile)", Target: "<= 2x"}}, nil
}

// sizeRun writes the corpus and reconciles it into a fresh store; it
// returns the corpus file and the store file.
func sizeRun(ctx context.Context, c *Config, n int, autoOnly bool) (corpus, db string, err error) {
	spec, err := c.corpus(fmt.Sprintf("size-%d-%v.jsonl", n, autoOnly), gen.Options{N: n, Seed: 3, AutoOnly: autoOnly})
	if err != nil {
		return "", "", err
	}
	src, err := source.Parse(spec)
	if err != nil {
		return "", "", err
	}
	eng, err := c.engine(ctx)
	if err != nil {
		return "", "", err
	}
	s := sink()
	defer s.Close()
	db = filepath.Join(c.Dir, fmt.Sprintf("size-%d-%d.db", n, time.Now().UnixNano()))
	st, err := bolt.Open(db, store.Options{MaxBatchSize: 8})
	if err != nil {
		return "", "", err
	}
	r := &replay.Reconciler{Engine: eng, Store: st, MaxParallel: 8, Actor: "bench",
		Router: replay.NewRulesRouter(eng.Rules, &replay.Route{Name: "sink", Dispatcher: replay.NewHTTPTarget(s.URL, "", 10*time.Second, nil)})}
	if _, err := r.Run(ctx, []source.Source{src}); err != nil {
		st.Close()
		return "", "", err
	}
	if err := st.Close(); err != nil {
		return "", "", err
	}
	return spec[len("jsonl:"):], db, nil
}

// Breakdown writes where a bbolt file's bytes go: per bucket, the bytes
// in use and allocated in leaf and branch pages (overflow pages included:
// a value larger than a page spills into them), and per audit record kind
// the bytes of the stored values. It is the measurement behind the store
// format (issue 16).
func Breakdown(w io.Writer, dbPath string) error {
	fi, err := os.Stat(dbPath)
	if err != nil {
		return err
	}
	// Read-write (nothing is written): a read-only open skips the freelist.
	db, err := bbolt.Open(dbPath, 0o600, &bbolt.Options{FreelistType: bbolt.FreelistMapType})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bbolt.Tx) error {
		st := db.Stats()
		fmt.Fprintf(w, "file %d bytes, %d pages of %d; free pages %d (+%d pending), freelist %d bytes\n",
			fi.Size(), fi.Size()/int64(db.Info().PageSize), db.Info().PageSize, st.FreePageN, st.PendingPageN, st.FreelistInuse)
		fmt.Fprintf(w, "| bucket | keys | key+value bytes | leaf in use | leaf alloc | leaf fill | overflow pages | branch alloc |\n|---|---|---|---|---|---|---|---|\n")
		var totalAlloc int
		err := tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			s := b.Stats()
			var kv int
			_ = b.ForEach(func(k, v []byte) error { kv += len(k) + len(v); return nil })
			alloc := s.LeafAlloc + s.BranchAlloc
			totalAlloc += alloc
			fill := 0.0
			if s.LeafAlloc > 0 {
				fill = float64(s.LeafInuse) / float64(s.LeafAlloc)
			}
			fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %.2f | %d | %d |\n", name, s.KeyN, kv, s.LeafInuse, s.LeafAlloc, fill, s.LeafOverflowN, s.BranchAlloc)
			return nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "buckets allocate %d of the file's %d bytes\n", totalAlloc, fi.Size())
		b := tx.Bucket([]byte("audit"))
		if b == nil {
			return nil
		}
		type agg struct{ n, bytes, input, decision int }
		kinds := map[string]*agg{}
		err = b.ForEach(func(k, v []byte) error {
			var s struct {
				Body json.RawMessage `json:"body"`
			}
			_ = store.DecodeValue(v, &s)
			var r struct {
				Kind     string          `json:"kind"`
				Input    json.RawMessage `json:"input"`
				Decision json.RawMessage `json:"decision"`
			}
			_ = json.Unmarshal(s.Body, &r)
			a := kinds[r.Kind]
			if a == nil {
				a = &agg{}
				kinds[r.Kind] = a
			}
			a.n++
			a.bytes += len(k) + len(v)
			a.input += len(r.Input)
			a.decision += len(r.Decision)
			return nil
		})
		if err != nil {
			return err
		}
		names := make([]string, 0, len(kinds))
		for k := range kinds {
			names = append(names, k)
		}
		sort.Strings(names)
		fmt.Fprintf(w, "| audit kind | records | stored bytes | stored bytes/record | input JSON bytes (decoded) | decision JSON bytes (decoded) |\n|---|---|---|---|---|---|\n")
		for _, k := range names {
			a := kinds[k]
			fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d |\n", k, a.n, a.bytes, a.bytes/a.n, a.input, a.decision)
		}
		return nil
	})
}
