package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

// pgReads measures the reads of `reads` on PostgreSQL (issue 16): two
// filtered pages of 20, one entry with its history, a page sorted by
// last failure, a /metrics scrape and stats, each as a ratio to a bare SELECT of 20 entry rows by primary
// key (and their JSON decode) on the same database, alternated, at two
// store sizes. The ratio must not grow with the store.
func pgReads(ctx context.Context, c *Config) ([]Row, error) {
	if _, err := testsvc.PostgresDB(fmt.Sprintf("bench_probe_%d", time.Now().UnixNano())); err != nil {
		return []Row{{Measure: "reads on PostgreSQL", Note: "skipped: " + err.Error()}}, nil
	}
	defer testsvc.Stop()
	var rows []Row
	// The sizes of the bbolt reads rows (issue 16's): filling 1M entries
	// takes ~100 s of this machine.
	for _, n := range []int{c.size(100_000, 500), c.size(1_000_000, 2_000)} {
		dsn, err := testsvc.PostgresDB(fmt.Sprintf("bench_reads_%d_%d", n, time.Now().UnixNano()))
		if err != nil {
			return rows, err
		}
		c.progress(fmt.Sprintf("reads on PostgreSQL: storing %d entries", n))
		st, err := postgres.Open(ctx, dsn, store.Options{})
		if err != nil {
			return rows, err
		}
		r, err := measurePGReads(ctx, c, st, dsn, n)
		st.Close()
		if err != nil {
			return rows, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// fillPG ingests n entries as fillStore writes them, one in ten with its
// decision record (an entry's history reads its own among n/10; a record
// for each would triple the time to fill 1M entries).
func fillPG(ctx context.Context, st *postgres.Postgres, n int) error {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	payload := []byte(`{"order":{"id":"o-XXXXXXX","lines":[` + strings.Repeat(`{"sku":"sku-1234","qty":1,"price":"12.50"},`, 20) + `{"sku":"last"}]}}`)
	const chunk = 1000
	for from := 0; from < n; from += chunk {
		var recs []*store.EntryRecord
		for i := from; i < min(from+chunk, n); i++ {
			e := entry.Entry{ID: fmt.Sprintf("e%08d", i), Source: benchSources[i%3], Topic: fmt.Sprintf("orders.t%02d", i%40),
				ReasonCode: "timeout", Message: fmt.Sprintf("upstream timeout after %d ms calling inventory", 100+i%900),
				IdempotencyKey: fmt.Sprintf("key-%08d", i), Attempts: 3, Payload: payload,
				LastFailure: base.Add(time.Duration(i*7919%n) * time.Second)}
			recs = append(recs, &store.EntryRecord{Entry: e, Status: benchStates[i%len(benchStates)], Class: benchClasses[i%len(benchClasses)],
				Action: triage.AutoReplay, FirstSeen: base.Add(time.Duration(i) * time.Second), LastSeen: base})
		}
		if _, err := st.Ingest(ctx, recs); err != nil {
			return err
		}
		if err := st.Update(ctx, func(tx store.Tx) error {
			for i, r := range recs {
				if (from+i)%10 != 0 {
					continue
				}
				e := r.Entry
				input := e
				input.Payload = nil
				if _, err := tx.Append(&audit.Record{Kind: audit.KindDecision, Actor: "bench", EntryRef: e.Ref(), EntryID: e.ID,
					Source: e.Source, Key: e.IdempotencyKey, Input: &input, Action: triage.AutoReplay, Time: r.FirstSeen,
					Decision: &triage.Decision{Class: r.Class, ProposedAction: triage.AutoReplay, Action: triage.AutoReplay}}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

func measurePGReads(ctx context.Context, c *Config, st *postgres.Postgres, dsn string, n int) ([]Row, error) {
	if err := fillPG(ctx, st, n); err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE entries`); err != nil {
		return nil, err
	}
	ops, bare, err := pgReadOps(ctx, st, pool, n)
	if err != nil {
		return nil, err
	}
	return timeReads(c, readsRun{label: "reads on PostgreSQL", where: " on PostgreSQL", baseline: "of a bare SELECT of 20 rows",
		reps: c.size(30, 2), rounds: c.size(9, 2)}, n, ops, bare)
}

// pgReadOps are the timed reads of a store of n entries (filled by
// fillPG) and the bare read they are compared with.
func pgReadOps(ctx context.Context, st *postgres.Postgres, pool *pgxpool.Pool, n int) ([]readOp, func() error, error) {
	srv, err := server.New(server.Config{Store: st})
	if err != nil {
		return nil, nil, err
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	mid := fmt.Sprintf("jsonl:e%08d", n/2/30*30) // a jsonl entry with a decision record
	bare := func() error {
		rows, err := pool.Query(ctx, `SELECT rec FROM entries WHERE ref >= $1 ORDER BY ref LIMIT 20`, mid)
		if err != nil {
			return err
		}
		defer rows.Close()
		got := 0
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				return err
			}
			var r map[string]any
			if err := json.Unmarshal(b, &r); err != nil {
				return err
			}
			got++
		}
		if got != 20 {
			return fmt.Errorf("bare read got %d rows", got)
		}
		return rows.Err()
	}
	open := store.OpenStates()
	page := func(items int, err error) error {
		if err == nil && items != 20 {
			err = fmt.Errorf("page of %d", items)
		}
		return err
	}
	ops := []readOp{
		{"page of 20 (open states, class transient)", func() error {
			p, err := st.Page(ctx, store.EntryFilter{States: open, Classes: []string{"transient"}}, "", 20)
			if err != nil {
				return err
			}
			return page(len(p.Items), nil)
		}},
		{"page of 20 (topic glob orders.t1*, source " + pageSource + ")", func() error {
			p, err := st.Page(ctx, store.EntryFilter{Topic: "orders.t1*", Sources: []string{pageSource}}, "", 20)
			if err != nil {
				return err
			}
			return page(len(p.Items), nil)
		}},
		{"one entry with its history (dlq show)", func() error {
			d, err := replay.Show(ctx, st, mid)
			if err == nil && len(d.Decisions) != 1 {
				err = fmt.Errorf("history of %d", len(d.Decisions))
			}
			return err
		}},
		{"page of 20 sorted by last failure (open states)", func() error {
			p, err := st.SortedPage(ctx, store.EntryFilter{States: open}, false, "", 20)
			if err != nil {
				return err
			}
			return page(len(p.Items), nil)
		}},
	}
	ops = append(ops, scrapeAndStats(ctx, srv, st, n, now)...)
	return ops, bare, nil
}
