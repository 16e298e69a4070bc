package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// Issue 33: the sealer chains a record by updating it after its writer
// inserted it. On full pages the new version went to another page, with
// an entry in each of the audit table's five indexes (one of them parsing
// the record's JSON): ~145 µs of PostgreSQL's time a replay. With room on
// each page the version stays on its page and, changing no indexed column,
// is a HOT update. A record whose sealed version is on the page its
// inserted one was on was updated in place (the sealer changes only prev
// and hash, in no index); one that moved paid the index entries.
func TestPostgresSealerUpdatesRecordsOnTheirPage(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	p.stopSealer() // sealed below, after the pages are read
	p.stopSealer = nil
	// Records the size of a replay's (~750 bytes), three a transaction.
	detail := strings.Repeat("x", 500)
	const txs = 100
	for i := range txs {
		if err := p.Update(ctx, func(tx store.Tx) error {
			for k := range 3 {
				ref := fmt.Sprintf("jsonl:job_%05d", i)
				if _, err := tx.Append(&audit.Record{Actor: "bench", Kind: audit.KindDecision, EntryRef: ref, Action: "auto_replay", Reason: fmt.Sprintf("%d %s", k, detail)}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	pages := func() map[int64]string {
		rows, err := p.pool.Query(ctx, `SELECT seq, (ctid::text::point)[0]::text, hash IS NOT NULL FROM audit`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[int64]string{}
		for rows.Next() {
			var seq int64
			var page string
			var sealed bool
			if err := rows.Scan(&seq, &page, &sealed); err != nil {
				t.Fatal(err)
			}
			m[seq] = fmt.Sprintf("%s %v", page, sealed)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := pages()
	if len(before) != 3*txs {
		t.Fatalf("%d records, want %d", len(before), 3*txs)
	}
	if n, err := p.SealAudit(ctx, true); err != nil || n != 3*txs {
		t.Fatalf("sealed %d of %d records: %v", n, 3*txs, err)
	}
	after := pages()
	moved := 0
	for seq, b := range before {
		page, sealed, _ := strings.Cut(b, " ")
		if sealed != "false" {
			t.Fatalf("record %d was sealed before the sealer ran", seq)
		}
		if after[seq] != page+" true" {
			moved++
		}
	}
	// A few move all the same: a page's last records, when the versions
	// of the records before them filled it.
	if moved > len(before)/10 {
		t.Errorf("%d of %d records moved to another page when sealed (not HOT updates)", moved, len(before))
	}
}

// Issue 33: a transaction's first write of a ledger key (an insert) was
// sent at once, a round trip of its own per replay, so that a second
// writer of the key would wait on the first's row; it now goes with the
// transaction's next round trip, and the loser's insert fails the
// statement at COMMIT instead. Writers that all read the key absent
// commit at once: one creates it, the others commit nothing (their other
// writes neither) and are run again on the key as the winner left it, a
// conflict, as before.
func TestPostgresFirstWritesOfAKeyRace(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	const writers = 4
	var arrived sync.WaitGroup
	arrived.Add(writers)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	errs := make([]error, writers)
	runs := make([]int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Update(ctx, func(tx store.Tx) error {
				runs[i]++
				ref := fmt.Sprintf("jsonl:w%d", i)
				if _, err := tx.Transition(idempotency.Transition{Key: "k", To: idempotency.Decided, EntryRef: ref}); err != nil {
					return err
				}
				if _, err := tx.Append(&audit.Record{Actor: fmt.Sprintf("w%d", i), Kind: audit.KindDecision, EntryRef: ref, Action: "auto_replay"}); err != nil {
					return err
				}
				if runs[i] == 1 {
					// Every writer read the key absent before any commits
					// (sent at once, the first insert held the others back:
					// they go on after a while).
					arrived.Done()
					select {
					case <-all:
					case <-time.After(2 * time.Second):
						t.Logf("writer %d waited out the others", i)
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			t.Fatalf("writers %d and %d both created the key", winner, i)
		case !errors.Is(err, idempotency.ErrConflict):
			t.Errorf("writer %d: %v, want a conflict on the key", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no writer created the key: %v", errs)
	}
	var rec []byte
	if err := p.pool.QueryRow(ctx, `SELECT rec FROM ledger WHERE key = 'k'`).Scan(&rec); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"jsonl:w%d"`, winner); !strings.Contains(string(rec), want) {
		t.Errorf("the key holds %s, want the winner's entry %s", rec, want)
	}
	rows, err := p.pool.Query(ctx, `SELECT actor FROM audit WHERE actor LIKE 'w%' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	actors, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{fmt.Sprintf("w%d", winner)}; !slices.Equal(actors, want) {
		t.Errorf("audit records of %v committed, want only the winner's %v", actors, want)
	}
}

// Issue 33: the audit numbering of a window's transaction was planned at
// every call: a custom plan knows how many numbers it takes and looked
// cheaper than the generic one, so the plan cache never kept it. Run
// more often than the plan cache's five custom plans, on one connection,
// it must run a generic plan.
func TestPostgresAuditNumberingKeepsItsPlan(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for i := range 8 {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		var now time.Time
		if err := tx.QueryRow(ctx, auditReserveSQL, false, 1+i%3).Scan(&seqs, &now); err != nil {
			t.Fatal(err)
		}
		if len(seqs) != 1+i%3 {
			t.Fatalf("took %d numbers, want %d", len(seqs), 1+i%3)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var generic, custom int64
	if err := conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`, auditReserveSQL).Scan(&generic, &custom); err != nil {
		t.Fatal(err)
	}
	if generic == 0 {
		t.Errorf("the audit numbering ran %d custom plans and no generic one", custom)
	}
}

// Issue 33: a window's fence checks lock its entries and their ledger
// rows by arrays of keys. A custom plan knew the array and looked cheaper
// than the generic one, so each was planned again at nearly every call.
// Run more often than the plan cache's five custom plans on one
// connection, each must run a generic plan, and that plan probes the
// primary key, on a new database's tables (no statistics) as on analyzed
// ones.
func TestPostgresFenceChecksKeepTheirPlans(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for i := range 8 {
		// As Update runs a window's transaction: its fence checks first.
		tx := &pgTx{ctx: ctx, q: conn, p: p, begin: true, ledger: map[string][]byte{}}
		var fs []store.Fence
		for k := range 1 + i%3 {
			fs = append(fs, store.Fence{Ref: fmt.Sprintf("jsonl:%d", k), Key: fmt.Sprintf("k%d", k), Token: 1})
		}
		if _, err := tx.CheckFences(fs); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `rollback`); err != nil {
			t.Fatal(err)
		}
	}
	for _, sql := range []string{fenceEntriesSQL, fenceLedgerSQL} {
		var generic, custom int64
		if err := conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`, sql).Scan(&generic, &custom); err != nil {
			t.Fatal(err)
		}
		if generic == 0 {
			t.Errorf("%.40s... ran %d custom plans and no generic one", sql, custom)
		}
	}
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := conn.Exec(ctx, `ANALYZE entries; ANALYZE ledger`); err != nil {
				t.Fatal(err)
			}
		}
		for _, sql := range []string{fenceEntriesSQL, fenceLedgerSQL} {
			plan := explainGeneric(t, conn.Conn(), sql, []string{"jsonl:a"})
			if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "_pkey") {
				t.Errorf("analyzed %v: the generic plan of %.40s... does not probe the primary key:\n%s", analyzed, sql, plan)
			}
		}
	}
}

// explainGeneric is the generic plan of sql with args, as the plan cache
// keeps it.
func explainGeneric(t *testing.T, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, fencePlanSQL); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
