package benchmark

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// ledger compares reconcile's durable ledger writes for one dispatch with
// raw bbolt writing the same bytes under the same keys, at the same
// concurrency, on the same disk. A dispatch is two fsynced commits: the
// intent (decided -> dispatching, the entry's status, an audit record)
// before the request, the outcome (dispatching -> succeeded, the status,
// an audit record) after it; both are measured. Runs alternate, each on a
// fresh file, and medians are compared.
func ledger(ctx context.Context, c *Config) ([]Row, error) {
	var rows []Row
	payload := make([]byte, 2048)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	dec := triage.Decision{Class: triage.Transient, Rule: "default:transient", Action: triage.AutoReplay,
		Reasons: []string{"reason code timeout is transient", "no rule matched"}}
	for _, workers := range []int{5, 32} {
		n := c.size(10_000, 100)
		c.progress(fmt.Sprintf("ledger writes: %d workers, intent and outcome commits", workers))
		var sizes [3]int
		run := 0
		ours := func() (time.Duration, error) {
			run++
			st, err := bolt.Open(filepath.Join(c.Dir, fmt.Sprintf("ledger-%d-%d.db", workers, run)), store.Options{MaxBatchSize: workers})
			if err != nil {
				return 0, err
			}
			defer st.Close()
			return parallel(workers, n, func(i int) error {
				e := entry.Entry{ID: fmt.Sprintf("e%08d", i), Source: jsonl.Kind, Payload: payload, Topic: "tool.email.send"}
				e.EnsureKey()
				if err := st.Update(ctx, func(tx store.Tx) error {
					if _, err := tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, To: idempotency.Decided, EntryRef: e.Ref(), PayloadHash: "sha256:x"}); err != nil {
						return err
					}
					if _, err := tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, From: idempotency.Decided, To: idempotency.Dispatching}); err != nil {
						return err
					}
					sealed, err := tx.Append(&audit.Record{Actor: "bench", Kind: audit.KindDispatch, EntryRef: e.Ref(), Key: e.IdempotencyKey, Decision: &dec})
					if err != nil {
						return err
					}
					sizes[1] = len(sealed.Body) + 200
					return tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusReplaying})
				}); err != nil {
					return err
				}
				return st.Update(ctx, func(tx store.Tx) error {
					if _, err := tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, From: idempotency.Dispatching, To: idempotency.Succeeded}); err != nil {
						return err
					}
					if _, err := tx.Append(&audit.Record{Actor: "bench", Kind: audit.KindOutcome, EntryRef: e.Ref(), Key: e.IdempotencyKey, Outcome: "succeeded"}); err != nil {
						return err
					}
					return tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusReplayed})
				})
			})
		}
		raw := func() (time.Duration, error) {
			run++
			db, err := bbolt.Open(filepath.Join(c.Dir, fmt.Sprintf("raw-%d-%d.db", workers, run)), 0o600, nil)
			if err != nil {
				return 0, err
			}
			defer db.Close()
			db.MaxBatchSize, db.MaxBatchDelay = workers, time.Millisecond
			if err := db.Update(func(tx *bbolt.Tx) error {
				for _, b := range []string{"a", "b", "c"} {
					if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				return 0, err
			}
			vals := [3][]byte{make([]byte, 300), make([]byte, max(sizes[1], 600)), make([]byte, len(payload)+600)}
			// The same keys as the ledger's (an idempotency key, an audit
			// sequence number, an entry ref): only replayctl's logic differs.
			return parallel(workers, n, func(i int) error {
				e := entry.Entry{ID: fmt.Sprintf("e%08d", i), Source: jsonl.Kind}
				e.EnsureKey()
				keys := [3][]byte{[]byte(e.IdempotencyKey), nil, []byte(e.Ref())}
				for commit := range 2 {
					var seq [8]byte
					binary.BigEndian.PutUint64(seq[:], uint64(2*i+commit))
					keys[1] = seq[:]
					if err := db.Batch(func(tx *bbolt.Tx) error {
						for j, b := range []string{"a", "b", "c"} {
							if err := tx.Bucket([]byte(b)).Put(keys[j], vals[j]); err != nil {
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
		}
		// ours first: the raw run copies the audit record's size from it.
		o, b, err := paired(c.size(3, 1), ours, raw)
		if err != nil {
			return nil, err
		}
		rows = append(rows, Row{Measure: fmt.Sprintf("durable ledger writes, %d workers (dispatches/s, 2 commits each)", workers),
			Figure: rate(n, o), Unit: "/s", Baseline: rate(n, b), Ratio: b.Seconds() / o.Seconds(),
			Note: "of raw bbolt Batch, same bytes", Target: ">= 0.7x"})
	}
	return rows, nil
}

// parallel runs fn(0..n-1) on `workers` goroutines and times it.
func parallel(workers, n int, fn func(i int) error) (time.Duration, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int, workers)
	t0 := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return time.Since(t0), first
}
