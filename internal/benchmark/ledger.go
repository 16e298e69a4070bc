package benchmark

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// ledger compares reconcile's durable ledger writes (a dispatch intent:
// two ledger transitions, the entry's status, an audit record, one fsynced
// transaction) with raw bbolt Batch writes of the same bytes, at the same
// concurrency, on the same disk.
func ledger(ctx context.Context, c *Config) ([]Row, error) {
	var rows []Row
	for _, workers := range []int{5, 32} {
		n := c.size(20_000, 400)
		c.progress(fmt.Sprintf("ledger writes: %d workers", workers))
		payload := make([]byte, 2048)
		for i := range payload {
			payload[i] = 'a' + byte(i%26)
		}
		path := filepath.Join(c.Dir, fmt.Sprintf("ledger-%d.db", workers))
		st, err := store.OpenBolt(path, store.Options{MaxBatchSize: workers})
		if err != nil {
			return nil, err
		}
		dec := triage.Decision{Class: triage.Transient, Rule: "default:transient", Action: triage.AutoReplay,
			Reasons: []string{"reason code timeout is transient", "no rule matched"}}
		var sizes [3]int
		ours, err := parallel(workers, n, func(i int) error {
			e := entry.Entry{ID: fmt.Sprintf("e%08d", i), Source: entry.KindJSONL, Payload: payload, Topic: "tool.email.send"}
			e.EnsureKey()
			return st.Update(ctx, func(tx store.Tx) error {
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
			})
		})
		st.Close()
		if err != nil {
			return nil, err
		}
		sizes[0], sizes[2] = 300, len(payload)+600

		raw, err := bolt.Open(filepath.Join(c.Dir, fmt.Sprintf("raw-%d.db", workers)), 0o600, nil)
		if err != nil {
			return nil, err
		}
		raw.MaxBatchSize, raw.MaxBatchDelay = workers, time.Millisecond
		if err := raw.Update(func(tx *bolt.Tx) error {
			for _, b := range []string{"a", "b", "c"} {
				if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
		vals := [3][]byte{make([]byte, sizes[0]), make([]byte, sizes[1]), make([]byte, sizes[2])}
		// The same keys as the ledger's (an idempotency key, an audit
		// sequence number, an entry ref): only replayctl's logic differs.
		base, err := parallel(workers, n, func(i int) error {
			e := entry.Entry{ID: fmt.Sprintf("e%08d", i), Source: entry.KindJSONL}
			e.EnsureKey()
			var seq [8]byte
			binary.BigEndian.PutUint64(seq[:], uint64(i))
			keys := [3][]byte{[]byte(e.IdempotencyKey), seq[:], []byte(e.Ref())}
			return raw.Batch(func(tx *bolt.Tx) error {
				for j, b := range []string{"a", "b", "c"} {
					if err := tx.Bucket([]byte(b)).Put(keys[j], vals[j]); err != nil {
						return err
					}
				}
				return nil
			})
		})
		raw.Close()
		if err != nil {
			return nil, err
		}
		rows = append(rows, Row{Measure: fmt.Sprintf("durable ledger writes, %d workers (intents/s)", workers),
			Figure: rate(n, ours), Unit: "/s", Baseline: rate(n, base), Ratio: base.Seconds() / ours.Seconds(),
			Note: "of raw bbolt Batch", Target: ">= 0.5x"})
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
