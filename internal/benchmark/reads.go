package benchmark

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/connector/registry"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// reads measures the reads that must not grow with the store (issue 16):
// a filtered page of 20, one entry with its history, a /metrics scrape and
// stats, each as a ratio to a bare bbolt cursor read (and JSON decode) of
// 20 entry records of the same file, alternated in the same run, at two
// store sizes. The ratio must not grow with the store. Then the peak RSS
// of `dlq list` and `stats` on the larger store, measured on that process
// itself (`bench peak` reports its own VmHWM: a child of the harness would inherit the
// harness's peak).
func reads(ctx context.Context, c *Config) ([]Row, error) {
	var rows []Row
	// Quick (make test): 1,000 and 3,000, enough to see a ratio grow;
	// filling 10,000 took 119 s of the suite's run on the shared 2-core
	// machine, and this part runs twice (TestHarnessSmoke, TestReadsRows).
	sizes := []int{c.size(100_000, 1_000), c.size(1_000_000, 3_000)}
	// The stores stay in c.Dir (removed with it): a rerun with --dir reuses them.
	var last string
	for _, n := range sizes {
		path := filepath.Join(c.Dir, fmt.Sprintf("reads-%d.db", n))
		c.progress(fmt.Sprintf("reads: storing %d entries", n))
		if err := fillStore(ctx, path, n); err != nil {
			return rows, err
		}
		r, err := measureReads(ctx, c, path, n)
		if err != nil {
			return rows, err
		}
		rows = append(rows, r...)
		last = path
	}
	if c.Self == "" {
		return rows, nil // memory rows measure the replayctl binary (make bench)
	}
	n := sizes[len(sizes)-1]
	for _, cmd := range [][]string{{"dlq", "list", "--size", "20"}, {"stats"}} {
		row := Row{Measure: fmt.Sprintf("peak RSS of `%s` at %d entries", strings.Join(cmd, " "), n), Unit: "MB", Target: "< 64 MB"}
		_, rss, err := c.child(ctx, append(cmd, "--db", last)...)
		if err != nil {
			row.Note = "skipped: " + err.Error()
		}
		row.Figure = rss
		rows = append(rows, row)
	}
	return rows, nil
}

var (
	benchStates  = []string{store.StatusReplayed, store.StatusReplayed, store.StatusReplayed, store.StatusReplayed, store.StatusPending, store.StatusAwaitingApproval, store.StatusQuarantined, store.StatusFailed, store.StatusResolved, store.StatusManualReview}
	benchClasses = []triage.Class{triage.Transient, triage.Transient, triage.Poison, triage.Governance, triage.UnknownCommit}
	// benchSources are three source kinds: jsonl and two others whose
	// source is a file (any three names would do).
	benchSources = append([]string{jsonl.Kind}, registry.FileKinds()[:2]...)
	// pageSource is the one a page is filtered by.
	pageSource = benchSources[2]
)

// fillStore writes n entries, each with a decision record, in large
// transactions (the store as reconcile leaves it, built faster).
func fillStore(ctx context.Context, path string, n int) error {
	if _, err := os.Stat(path); err == nil {
		// Reused: a read-write open brings its indexes up to date.
		st, err := bolt.Open(path, store.Options{})
		if err != nil {
			return err
		}
		return st.Close()
	}
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	st, err := bolt.Open(tmp, store.Options{})
	if err != nil {
		return err
	}
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	payload := []byte(`{"order":{"id":"o-XXXXXXX","lines":[` + strings.Repeat(`{"sku":"sku-1234","qty":1,"price":"12.50"},`, 20) + `{"sku":"last"}]}}`)
	// bbolt splits a node only at commit, so a transaction's inserts into
	// the middle of one node move all the keys after them: 5,000 entries
	// (about 20 index keys each) a transaction made the fill quadratic
	// (3,000 entries took 12 s under -race, 1,000 took 1.2 s).
	const chunk = 500
	for from := 0; from < n; from += chunk {
		if err := ctx.Err(); err != nil {
			st.Close()
			return err
		}
		err := st.Update(ctx, func(tx store.Tx) error {
			for i := from; i < min(from+chunk, n); i++ {
				e := entry.Entry{ID: fmt.Sprintf("e%08d", i), Source: benchSources[i%3], Topic: fmt.Sprintf("orders.t%02d", i%40),
					ReasonCode: "timeout", Message: fmt.Sprintf("upstream timeout after %d ms calling inventory", 100+i%900),
					IdempotencyKey: fmt.Sprintf("key-%08d", i), Attempts: 3, Payload: payload}
				r := &store.EntryRecord{Entry: e, Status: benchStates[i%len(benchStates)], Class: benchClasses[i%len(benchClasses)],
					Action: triage.AutoReplay, FirstSeen: base.Add(time.Duration(i) * time.Second), LastSeen: base}
				input := e
				input.Payload = nil
				sealed, err := tx.Append(&audit.Record{Kind: audit.KindDecision, Actor: "bench", EntryRef: e.Ref(), EntryID: e.ID,
					Source: e.Source, Key: e.IdempotencyKey, Input: &input, Action: triage.AutoReplay, Time: r.FirstSeen,
					Decision: &triage.Decision{Class: r.Class, ProposedAction: triage.AutoReplay, Action: triage.AutoReplay}})
				if err != nil {
					return err
				}
				r.LastDecision = sealed.Seq
				if err := tx.PutEntry(r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			st.Close()
			return err
		}
	}
	if err := st.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// measureReads alternates each read with the bare baseline and keeps the
// medians.
func measureReads(ctx context.Context, c *Config, path string, n int) ([]Row, error) {
	st, err := bolt.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if _, err := st.Counters(ctx); err != nil {
		return nil, fmt.Errorf("reads: %w", err) // never time the fallback scan
	}
	// bbolt takes a shared lock read-only: the bare read opens the same file.
	raw, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	srv, err := server.New(server.Config{Store: st})
	if err != nil {
		return nil, err
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	mid := fmt.Sprintf("e%08d", n/2/3*3) // a jsonl entry (sources alternate by 3)
	bare := func() error {
		return raw.View(func(tx *bbolt.Tx) error {
			b := tx.Bucket([]byte("entries"))
			if b == nil {
				return fmt.Errorf("no entries bucket")
			}
			cur := b.Cursor()
			got := 0
			for k, v := cur.Seek([]byte("jsonl:" + mid)); k != nil && got < 20; k, v = cur.Next() {
				var r store.EntryRecord
				if err := store.DecodeValue(v, &r); err != nil { // JSON, compressed as stored
					return err
				}
				got++
			}
			if got != 20 {
				return fmt.Errorf("bare read got %d records", got)
			}
			return nil
		})
	}
	open := store.OpenStates()
	ops := []readOp{
		{"page of 20 (open states, class transient)", func() error {
			p, err := st.Page(ctx, store.EntryFilter{States: open, Classes: []string{"transient"}}, "", 20)
			if err == nil && len(p.Items) != 20 {
				err = fmt.Errorf("page of %d", len(p.Items))
			}
			return err
		}},
		{"page of 20 (topic glob orders.t1*, source " + pageSource + ")", func() error {
			p, err := st.Page(ctx, store.EntryFilter{Topic: "orders.t1*", Sources: []string{pageSource}}, "", 20)
			if err == nil && len(p.Items) != 20 {
				err = fmt.Errorf("page of %d", len(p.Items))
			}
			return err
		}},
		{"groups list (a page: the top 20 failure groups)", func() error {
			gs, err := st.Groups(ctx, now, 20)
			if err == nil && len(gs) == 0 {
				err = fmt.Errorf("no groups")
			}
			return err
		}},
		{"one entry with its history (dlq show)", func() error {
			d, err := replay.Show(ctx, st, "jsonl:"+mid)
			if err == nil && len(d.Decisions) != 1 {
				err = fmt.Errorf("history of %d", len(d.Decisions))
			}
			return err
		}},
	}
	ops = append(ops, scrapeAndStats(ctx, srv, st, n, now)...)
	return timeReads(c, readsRun{label: "reads", where: "", baseline: "of a bare bbolt read of 20 records",
		reps: c.size(50, 3), rounds: c.size(15, 3)}, n, ops, bare)
}

// readOp is one read a user makes, as the reads rows time it.
type readOp struct {
	name string
	fn   func() error
}

// scrapeAndStats are the reads both stores are timed on beside their
// pages: a /metrics scrape through the server and `stats`.
func scrapeAndStats(ctx context.Context, srv http.Handler, st replay.Reporter, n int, now time.Time) []readOp {
	return []readOp{
		{"/metrics scrape", func() error {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK {
				return fmt.Errorf("/metrics answered %d", rec.Code)
			}
			return nil
		}},
		{"stats", func() error {
			s, err := replay.ComputeStats(ctx, st, now)
			if err == nil && s.Entries != n {
				err = fmt.Errorf("stats count %d entries", s.Entries)
			}
			return err
		}},
	}
}

// readsRun says how a store's reads are timed and named.
type readsRun struct {
	label    string // progress prefix
	where    string // after the read's name in its row (" on PostgreSQL")
	baseline string // what the bare read is
	reps     int    // calls per timing
	rounds   int    // alternating rounds
}

// timeReads times each op against the bare read of the same rows, the
// runs alternating (paired), and makes a row of each.
func timeReads(c *Config, run readsRun, n int, ops []readOp, bare func() error) ([]Row, error) {
	timeIt := func(fn func() error) (time.Duration, error) {
		start := time.Now()
		for range run.reps {
			if err := fn(); err != nil {
				return 0, err
			}
		}
		return time.Since(start) / time.Duration(run.reps), nil
	}
	var rows []Row
	for _, op := range ops {
		c.progress(fmt.Sprintf("%s: %s at %d entries", run.label, op.name, n))
		o, b, err := paired(run.rounds, func() (time.Duration, error) { return timeIt(op.fn) }, func() (time.Duration, error) { return timeIt(bare) })
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", op.name, run.where, err)
		}
		rows = append(rows, Row{Measure: fmt.Sprintf("%s%s, %d entries", op.name, run.where, n), Figure: float64(o.Microseconds()), Unit: "µs",
			Baseline: float64(b.Microseconds()), Ratio: float64(o) / float64(b), Note: run.baseline,
			Target: "<= 10x, not growing with the store"})
	}
	return rows, nil
}
