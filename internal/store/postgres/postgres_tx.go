package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replayctl/replayctl/internal/store"
)

// Round trips of a PostgreSQL transaction (issue 16). A worker's slot
// spent most of a replay waiting on ~40 round trips, each one statement:
// BEGIN, COMMIT, a read-only transaction around every read, the ledger row
// read again by every transition, the entry read again after the fence
// check had locked it. A pgTx now
//
//   - sends BEGIN with its first statement, in one pipelined batch;
//   - queues the writes whose answer it does not need (the ledger, entry,
//     approval and audit rows it writes) and sends them with the next read
//     or with COMMIT, in one batch: reads still see every earlier write,
//     and a write that fails still fails the transaction, at the next
//     round trip instead of at once;
//   - keeps the rows it holds locked: a ledger row read FOR UPDATE (as it
//     last wrote it) and the fenced entry, read with its fence;
//   - (View) reads without a transaction: at READ COMMITTED every
//     statement takes its own snapshot anyway, so BEGIN READ ONLY and
//     COMMIT bought nothing but two round trips.
//
// Invariants hold as before: nothing is visible to others before COMMIT,
// and a first ledger write that finds the key created meanwhile fails the
// transaction (errCreatedConcurrently), which Update runs again.

// pgQuerier is what a pgTx sends through: the pool (View) or the
// transaction's connection (Update).
type pgQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// pgWrite is a queued write, what it writes (for errors); check judges
// its command tag.
type pgWrite struct {
	what  string
	sql   string
	args  []any
	check func(pgconn.CommandTag) error
}

// queue adds a write to send with the next round trip.
func (t *pgTx) queue(what string, check func(pgconn.CommandTag) error, sql string, args ...any) {
	t.pending = append(t.pending, pgWrite{what: what, sql: sql, args: args, check: check})
}

// queryRow sends sql after BEGIN (when not sent yet) and the queued
// writes, in one round trip.
func (t *pgTx) queryRow(sql string, args ...any) pgx.Row {
	if !t.begin && len(t.pending) == 0 {
		return t.q.QueryRow(t.ctx, sql, args...)
	}
	br, n := t.send(func(b *pgx.Batch) { b.Queue(sql, args...) })
	return &batchRow{t: t, br: br, n: n}
}

// exec sends a write now, with what is queued, in one round trip: for a
// write others must meet before this transaction goes on (a new ledger
// key: a second writer of it waits on this one's row, then sees it).
func (t *pgTx) exec(what string, check func(pgconn.CommandTag) error, sql string, args ...any) error {
	t.queue(what, check, sql, args...)
	br, writes := t.send(func(*pgx.Batch) {})
	err := drain(br, writes)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// send queues BEGIN (once), the pending writes and then what last adds;
// n is how many results precede last's.
func (t *pgTx) send(last func(*pgx.Batch)) (pgx.BatchResults, []pgWrite) {
	b := &pgx.Batch{}
	var writes []pgWrite
	if t.begin {
		writes = append(writes, pgWrite{what: "begin", sql: "begin"})
		t.begin, t.begun = false, true
	}
	writes = append(writes, t.pending...)
	t.pending = nil
	for _, w := range writes {
		b.Queue(w.sql, w.args...)
	}
	last(b)
	return t.q.SendBatch(t.ctx, b), writes
}

// drain reads the results of the writes sent before a batch's last
// statement, failing on the first that failed or whose check fails.
func drain(br pgx.BatchResults, writes []pgWrite) error {
	for _, w := range writes {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("%s: %w", w.what, err)
		}
		if w.check != nil {
			if err := w.check(tag); err != nil {
				return err
			}
		}
	}
	return nil
}

// batchRow is the row of a batch's last statement.
type batchRow struct {
	t  *pgTx
	br pgx.BatchResults
	n  []pgWrite
}

func (r *batchRow) Scan(dest ...any) error {
	if err := drain(r.br, r.n); err != nil {
		_ = r.br.Close()
		return err
	}
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// commit sends what is queued with COMMIT; a transaction that sent
// nothing has nothing to commit.
func (t *pgTx) commit() error {
	t.queueCommitWrites()
	if t.begin && len(t.pending) == 0 {
		return nil
	}
	br, writes := t.send(func(b *pgx.Batch) { b.Queue("commit") })
	err := finishCommit(br, drain(br, writes))
	if err == nil {
		t.begun = false
	}
	return err
}

// finishCommit reads the answer to the COMMIT that ends batch br, when
// err (what the batch's earlier statements answered) is nil, and closes
// br. COMMIT of a failed transaction answers ROLLBACK, an error too.
func finishCommit(br pgx.BatchResults, err error) error {
	if err == nil {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err == nil && tag.String() != "COMMIT" {
			err = pgx.ErrTxCommitRollback
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// commitWrite is one of the statements a transaction sends with COMMIT,
// its parameters numbered from $1.
type commitWrite struct {
	sql  string
	args []any
}

// paramRef is a statement parameter, $n.
var paramRef = regexp.MustCompile(`\$([0-9]+)`)

// queueCommitWrites queues, as one statement, what a transaction writes
// last: its audit records, then what they add to the audit counters and
// what its entry writes add to the entry counters (up to three statements
// of ~10 per transaction, each costing the backend about as much as a
// small write). Each is a data-modifying WITH of the last: PostgreSQL runs
// them all, in an order fixed by the statement, so two writers lock their
// counter rows in one order as before. A failure fails the transaction at
// COMMIT, as any queued write.
func (t *pgTx) queueCommitWrites() {
	var ws []commitWrite
	for _, f := range []func() (commitWrite, bool){t.auditWrite, t.auditCountsWrite, t.entryCountsWrite} {
		if w, ok := f(); ok {
			ws = append(ws, w)
		}
	}
	switch len(ws) {
	case 0:
		return
	case 1:
		t.queue("write audit records and counters", nil, ws[0].sql, ws[0].args...)
		return
	}
	var sql strings.Builder
	var args []any
	for i, w := range ws {
		shifted := paramRef.ReplaceAllStringFunc(w.sql, func(ref string) string {
			n, _ := strconv.Atoi(ref[1:])
			return "$" + strconv.Itoa(n+len(args))
		})
		switch {
		case i == 0:
			fmt.Fprintf(&sql, "WITH w%d AS (%s)", i, shifted)
		case i < len(ws)-1:
			fmt.Fprintf(&sql, ", w%d AS (%s)", i, shifted)
		default:
			sql.WriteString(" " + shifted)
		}
		args = append(args, w.args...)
	}
	t.queue("write audit records and counters", nil, sql.String(), args...)
}

// update runs fn once in a transaction on one connection.
func (p *Postgres) update(ctx context.Context, fn func(store.Tx) error) (err error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	t := &pgTx{ctx: ctx, q: conn, p: p, key: p.key, begin: true, ledger: map[string][]byte{}}
	defer func() {
		if t.begun {
			// Failed or panicked after BEGIN went out: roll back, or drop
			// the connection (the pool never reuses one left in a
			// transaction).
			if _, rerr := conn.Exec(context.WithoutCancel(ctx), "rollback"); rerr != nil {
				_ = conn.Conn().Close(context.WithoutCancel(ctx))
			}
		}
		conn.Release()
	}()
	if f, ok := store.FenceFrom(ctx); ok {
		// A worker whose claim is no longer current writes nothing at
		// all: not a ledger transition, not an entry, not a record.
		if err := t.fence(f); err != nil {
			return err
		}
	}
	if err := fn(t); err != nil {
		return err
	}
	if err := t.commit(); err != nil {
		return err
	}
	for _, row := range t.fenced {
		if row.wrote {
			p.markChecked(row.token, row.checked)
		}
	}
	return nil
}

// UnderFence runs fn as part of this transaction under the claim f: the
// claim's entry is checked (and locked) first, once per transaction, as
// the claim in an Update's context is. A window's entries write their
// intents (or outcomes) in one transaction, each under its own claim
// (issue 16): a stale claim fails fn with ErrStaleFence, and with it the
// transaction, whose parts the caller then commits alone (commitGroup).
func (t *pgTx) UnderFence(f store.Fence, fn func(store.Tx) error) error {
	if t.ro {
		return store.ErrReadOnly
	}
	if row := t.fenced[pgKey(f.Ref)]; row == nil || row.token != f.Token {
		if err := t.fence(f); err != nil {
			return err
		}
	}
	return fn(t)
}

// fence checks the claim f in this transaction.
func (t *pgTx) fence(f store.Fence) error {
	// A write under the claim: what was read ahead under it is not
	// served after it.
	t.p.dropAhead(f.Token)
	err := t.checkFence(f)
	if errors.Is(err, store.ErrStaleFence) {
		// The claim is over for this process and is never released by
		// it: forget its mark (reviewer's finding: one map entry a lost
		// lease, for the life of a serve).
		t.p.takeChecked(f.Token)
	}
	return err
}

var (
	_ pgQuerier = (*pgxpool.Pool)(nil)
	_ pgQuerier = (*pgxpool.Conn)(nil)
)

// fenceEntriesSQL and fenceLedgerSQL lock and read a window's claimed
// entries and their keys' ledger rows (CheckFences). The arrays are read
// through a subquery so that no plan knows them (issue 33, as
// auditReserveSQL): a custom plan, knowing how many refs it probes,
// looked cheaper than the generic one, which takes an array parameter for
// ten elements, so both statements were planned again at nearly every
// call (922 plans in 1,020 calls for the entries, 487 for the ledger;
// ~60 µs of PostgreSQL's time a replay with 4 workers, by
// pg_stat_statements). Every plan is now the same, the generic one is
// kept. A plan kept is kept until the table's statistics change, and a
// new database's tables have none: planned there, the generic plan read
// the whole table (a sequential scan looks cheapest on a table taken to
// be tiny), and every fence check after it, until autovacuum analyzed the
// table. So the window's transaction turns sequential scans off (for
// itself, in the round trip of its fence checks; its other statements
// probe primary keys too): the plan probes the primary key per element
// whatever the statistics (TestPostgresFenceChecksKeepTheirPlans).
const (
	fencePlanSQL    = `SELECT set_config('enable_seqscan', 'off', true)`
	fenceEntriesSQL = `SELECT ref, fence, coalesce(lease_until > now(), false), now(), rec, payload, sig, seen
	FROM entries WHERE ref = ANY ((SELECT $1::text[])::text[]) ORDER BY ref FOR UPDATE`
	fenceLedgerSQL = `SELECT key, rec FROM ledger WHERE key = ANY ((SELECT $1::text[])::text[]) ORDER BY key FOR UPDATE`
)

// CheckFences checks the claims of a window's transaction (UnderFence)
// in one round trip instead of one each: their entries are locked and
// read in ref order, then their keys' ledger rows in key order (two
// windows lock what they share in one order), in one statement each.
// stale[i] is the error of a claim no longer current, which writes
// nothing: the caller leaves its part out of the transaction. Its
// entry stays locked until the transaction ends, as any row a fence
// check read.
func (t *pgTx) CheckFences(fs []store.Fence) (stale []error, err error) {
	if t.ro {
		return nil, store.ErrReadOnly
	}
	refs := make([]string, 0, len(fs))
	var keys []string
	for _, f := range fs {
		t.p.dropAhead(f.Token)
		refs = append(refs, pgKey(f.Ref))
		if f.Key != "" {
			keys = append(keys, pgKey(f.Key))
		}
	}
	t.queue("plan the fence checks without sequential scans", nil, fencePlanSQL)
	br, writes := t.send(func(b *pgx.Batch) {
		b.Queue(fenceEntriesSQL, refs)
		b.Queue(fenceLedgerSQL, keys)
		b.Queue(auditReserveSQL, len(t.key) > 0, len(fs))
	})
	type found struct {
		row   *fencedRow
		token int64
		live  bool
	}
	rows := map[string]found{}
	ledger := map[string][]byte{}
	var now time.Time
	err = drain(br, writes)
	if err == nil {
		var r pgx.Rows
		if r, err = br.Query(); err == nil {
			for r.Next() {
				var ref string
				fr := found{row: &fencedRow{}}
				if err = r.Scan(&ref, &fr.token, &fr.live, &now, &fr.row.rec, &fr.row.payload, &fr.row.sig, &fr.row.seen); err != nil {
					break
				}
				rows[ref] = fr
			}
			r.Close()
			if err == nil {
				err = r.Err()
			}
		}
	}
	if err == nil {
		var r pgx.Rows
		if r, err = br.Query(); err == nil {
			for r.Next() {
				var key string
				var rec []byte
				if err = r.Scan(&key, &rec); err != nil {
					break
				}
				ledger[key] = rec
			}
			r.Close()
			if err == nil {
				err = r.Err()
			}
		}
	}
	if err == nil {
		err = t.scanReserved(br.QueryRow())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("check fences of %d claims: %w", len(fs), err)
	}
	if !now.IsZero() {
		t.start = now.UTC()
	}
	for _, k := range keys {
		t.ledger[k] = ledger[k] // nil: no row, which the first write checks
	}
	stale = make([]error, len(fs))
	if t.fenced == nil {
		t.fenced = map[string]*fencedRow{}
	}
	for i, f := range fs {
		fr, ok := rows[refs[i]]
		if !ok {
			stale[i] = fmt.Errorf("check fence of %s: %w", f.Ref, pgx.ErrNoRows)
			continue
		}
		if fr.token != f.Token || !fr.live {
			stale[i] = fmt.Errorf("%w (entry %s: token %d, current %d, lease live %v)", store.ErrStaleFence, f.Ref, f.Token, fr.token, fr.live)
			t.p.takeChecked(f.Token)
			continue
		}
		fr.row.token = f.Token
		t.fenced[refs[i]] = fr.row
	}
	return stale, nil
}
