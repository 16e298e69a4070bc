package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// BenchmarkLedgerDispatch is the ledger row of `replayctl bench` (issue
// 16) as a Go benchmark, for its profile and its bbolt page counts: 32
// writers each doing a dispatch's two commits (intent, outcome) through
// Update, against raw bbolt Batch putting the same sizes under the same
// keys. It reports bbolt's pages written and nodes spilled per commit.
//
//	go test -run '^$' -bench LedgerDispatch -benchtime 10000x -cpuprofile cpu.out ./internal/store/
func BenchmarkLedgerDispatch(b *testing.B) {
	payload := benchPayload()
	const workers = 32
	b.Run("ours", func(b *testing.B) {
		ctx := context.Background()
		st, err := Open(filepath.Join(b.TempDir(), "l.db"), store.Options{MaxBatchSize: workers})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		s0, t0 := st.db.Stats(), lastTxID(b, st.db)
		b.ResetTimer()
		runParallel(b, workers, b.N, func(i int) error {
			e := entry.Entry{ID: fmt.Sprintf("e%08d", i), Source: "jsonl", Payload: payload, Topic: "tool.email.send"}
			e.EnsureKey()
			if err := st.Update(ctx, benchIntent(e)); err != nil {
				return err
			}
			return st.Update(ctx, benchOutcome(e))
		})
		b.StopTimer()
		s1 := st.db.Stats()
		reportTxStats(b, s1.Sub(&s0), lastTxID(b, st.db)-t0)
	})
	b.Run("raw", func(b *testing.B) {
		db := rawABC(b)
		db.MaxBatchSize, db.MaxBatchDelay = workers, time.Millisecond
		vals := [3][]byte{make([]byte, 300), make([]byte, 900), make([]byte, len(payload)+600)}
		s0, t0 := db.Stats(), lastTxID(b, db)
		b.ResetTimer()
		runParallel(b, workers, b.N, func(i int) error {
			e := entry.Entry{ID: fmt.Sprintf("e%08d", i), Source: "jsonl"}
			e.EnsureKey()
			keys := [3][]byte{[]byte(e.IdempotencyKey), nil, []byte(e.Ref())}
			for commit := range 2 {
				var seq [8]byte
				binary.BigEndian.PutUint64(seq[:], uint64(2*i+commit))
				keys[1] = seq[:]
				if err := db.Batch(func(tx *bolt.Tx) error {
					for j, n := range []string{"a", "b", "c"} {
						if err := tx.Bucket([]byte(n)).Put(keys[j], vals[j]); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		})
		b.StopTimer()
		s1 := db.Stats()
		reportTxStats(b, s1.Sub(&s0), lastTxID(b, db)-t0)
	})
}

// reportTxStats reports bbolt's work per commit and per dispatch.
func reportTxStats(b *testing.B, d bolt.Stats, n int) {
	commits := float64(n)
	if commits == 0 {
		return
	}
	b.ReportMetric(float64(b.N*2)/commits, "callers/commit")
	b.ReportMetric(float64(d.TxStats.GetWrite())/commits, "pages-written/commit")
	b.ReportMetric(float64(d.TxStats.GetSpill())/commits, "nodes-spilled/commit")
	b.ReportMetric(float64(d.TxStats.GetWrite())/float64(b.N), "pages-written/dispatch")
	b.ReportMetric(float64(d.TxStats.GetSpillTime().Microseconds())/float64(b.N), "spill-µs/dispatch")
	b.ReportMetric(float64(d.TxStats.GetWriteTime().Microseconds())/float64(b.N), "write-µs/dispatch")
}

func runParallel(b *testing.B, workers, n int, fn func(i int) error) {
	cpu0 := processCPU(b)
	defer func() { b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(n), "cpu-µs/op") }()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// lastTxID is the id of the last committed write transaction.
func lastTxID(b *testing.B, db *bolt.DB) int {
	var id int
	if err := db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		b.Fatal(err)
	}
	return id
}

// processCPU is the process's user and system CPU time so far: on a
// shared machine wall time swings with the others' load, CPU far less.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLedgerInLock is the work BenchmarkLedgerDispatch does inside
// bbolt's write lock, on one goroutine and without fsync (NoSync), so that
// it can be compared on a shared machine: groups of 32 dispatches, each
// group an intent commit and an outcome commit of 32 callers. "percaller"
// gives every caller its own boltTx and flush (what bbolt's Batch did),
// "shared" one boltTx and one flush per commit (groupCommit), "raw" the
// raw baseline's three puts per caller.
func BenchmarkLedgerInLock(b *testing.B) {
	payload := benchPayload()
	const group = 32
	for _, mode := range []string{"percaller", "shared"} {
		b.Run(mode, func(b *testing.B) {
			st, err := Open(filepath.Join(b.TempDir(), "l.db"), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			st.db.NoSync = true
			commit := func(fns []func(store.Tx) error) error {
				return st.db.Update(func(btx *bolt.Tx) error {
					if mode == "percaller" {
						for _, fn := range fns {
							if err := st.runWrite(btx, fn); err != nil {
								return err
							}
						}
						return nil
					}
					setFillPercent(btx)
					t := st.writeTx(btx)
					for _, fn := range fns {
						if err := fn(t); err != nil {
							return err
						}
					}
					return t.flush()
				})
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += group {
				var in, out []func(store.Tx) error
				for j := i; j < min(i+group, b.N); j++ {
					e := entry.Entry{ID: fmt.Sprintf("e%08d", j), Source: "jsonl", Payload: payload, Topic: "tool.email.send"}
					e.EnsureKey()
					in, out = append(in, benchIntent(e)), append(out, benchOutcome(e))
				}
				if err := commit(in); err != nil {
					b.Fatal(err)
				}
				if err := commit(out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("raw", func(b *testing.B) {
		db := rawABC(b)
		db.NoSync = true
		vals := [3][]byte{make([]byte, 300), make([]byte, 900), make([]byte, len(payload)+600)}
		b.ResetTimer()
		for i := 0; i < b.N; i += group {
			for commit := range 2 {
				if err := db.Update(func(tx *bolt.Tx) error {
					for j := i; j < min(i+group, b.N); j++ {
						e := entry.Entry{ID: fmt.Sprintf("e%08d", j), Source: "jsonl"}
						e.EnsureKey()
						keys := [3][]byte{[]byte(e.IdempotencyKey), seqKey(uint64(2*j + commit)), []byte(e.Ref())}
						for k, n := range []string{"a", "b", "c"} {
							if err := tx.Bucket([]byte(n)).Put(keys[k], vals[k]); err != nil {
								return err
							}
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// rawABC is a bare bbolt file with the three buckets the raw baselines
// write (a ledger, an audit and an entry record per dispatch), closed when
// the benchmark ends.
func rawABC(b *testing.B) *bolt.DB {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "r.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, n := range []string{"a", "b", "c"} {
			if _, err := tx.CreateBucketIfNotExists([]byte(n)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return db
}

// benchPayload is the 2 KB payload of the ledger benchmarks' entries.
func benchPayload() []byte {
	payload := make([]byte, 2048)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	return payload
}

// benchDecision is the decision the ledger benchmarks' dispatch records
// carry.
var benchDecision = triage.Decision{Class: triage.Transient, Rule: "default:transient", Action: triage.AutoReplay,
	Reasons: []string{"reason code timeout is transient", "no rule matched"}}

// benchIntent is a dispatch's intent commit, as the ledger row of
// `replayctl bench` writes it: decided -> dispatching, an audit record
// with the decision, the entry replaying.
func benchIntent(e entry.Entry) func(store.Tx) error {
	return func(tx store.Tx) error {
		if _, err := tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, To: idempotency.Decided, EntryRef: e.Ref(), PayloadHash: "sha256:x"}); err != nil {
			return err
		}
		if _, err := tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, From: idempotency.Decided, To: idempotency.Dispatching}); err != nil {
			return err
		}
		if _, err := tx.Append(&audit.Record{Actor: "bench", Kind: audit.KindDispatch, EntryRef: e.Ref(), Key: e.IdempotencyKey, Decision: &benchDecision}); err != nil {
			return err
		}
		return tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusReplaying})
	}
}

// benchOutcome is the same dispatch's outcome commit.
func benchOutcome(e entry.Entry) func(store.Tx) error {
	return func(tx store.Tx) error {
		if _, err := tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, From: idempotency.Dispatching, To: idempotency.Succeeded}); err != nil {
			return err
		}
		if _, err := tx.Append(&audit.Record{Actor: "bench", Kind: audit.KindOutcome, EntryRef: e.Ref(), Key: e.IdempotencyKey, Outcome: "succeeded"}); err != nil {
			return err
		}
		return tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusReplayed})
	}
}
