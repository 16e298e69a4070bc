package postgres

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// The PostgreSQL audit chain, without a global row lock.
//
// Writers take a record number from a sequence and insert the record
// unchained (prev and hash NULL), inside their own transaction: many
// writers never queue on one row. One sealer at a time (elected per round
// by pg_try_advisory_xact_lock) chains the committed records after the
// head in number order, in batches, and signs the new head. A number
// whose transaction rolled back leaves a gap; the sealer fills it with a
// void record once it has proof that no transaction still holding such a
// number is running, so record numbers stay dense and the chain verifies
// exactly as bbolt's does. Records after the sealed head are the unsealed
// tail: audit verify counts them (audit.TailReader), and so does the
// replayctl_audit_unsealed_records metric.

// pgAuditMigration lets writers append without the head: prev and hash
// are filled in by the sealer.
const pgAuditMigration = `ALTER TABLE audit ALTER COLUMN prev DROP NOT NULL, ALTER COLUMN hash DROP NOT NULL;
	 ALTER TABLE audit_head ADD COLUMN signed boolean NOT NULL DEFAULT false;
	 CREATE SEQUENCE audit_seq;
	 SELECT setval('audit_seq', greatest(seq, 1), seq > 0) FROM audit_head;`

const (
	lockSeal = 0x7265706c61790003
	// sealBatch bounds one sealing transaction.
	sealBatch = 5000
	// sealEvery is how often each process's sealer tries to seal; with
	// the writers' rate it bounds the unsealed tail.
	sealEvery = 50 * time.Millisecond
	// settleWait bounds how long a round waits for the transactions that
	// hold lower record numbers to end before sealing what it can.
	settleWait = 2 * time.Second
)

// KindVoid marks a record number whose writing transaction rolled back.
const KindVoid = "void"

// Append writes r unchained; its number is final, its link comes later.
func (t *pgTx) Append(r *audit.Record) (audit.Sealed, error) {
	if t.ro {
		return audit.Sealed{}, store.ErrReadOnly
	}
	// The transaction id is taken before the number: the sealer's proof
	// that a gap is void rests on every holder of a number having one. A
	// keyless writer of a signed chain is refused before it takes one.
	var seq int64
	var now time.Time
	var signed bool
	if len(t.reserved) > 0 {
		// Taken with the window's fence checks (auditReserveSQL).
		seq, t.reserved = t.reserved[0], t.reserved[1:]
		now = t.start
	} else if err := t.queryRow(`WITH h AS MATERIALIZED (SELECT signed OR mac <> '' AS signed FROM audit_head WHERE id = 1),
		x AS MATERIALIZED (SELECT pg_current_xact_id() FROM h WHERE $1 OR NOT h.signed)
		SELECT (SELECT signed FROM h), coalesce((SELECT nextval('audit_seq') FROM x), 0), now()`, len(t.key) > 0).Scan(&signed, &seq, &now); err != nil {
		return audit.Sealed{}, fmt.Errorf("number audit record: %w", err)
	}
	if signed && len(t.key) == 0 {
		return audit.Sealed{}, store.ErrAuditKeyRequired
	}
	t.start = now.UTC()
	r.Seq = uint64(seq)
	if r.PolicySnapshot != "" && !r.SnapshotKept && t.p != nil {
		// This process stored it (PutSnapshot) before deciding with it.
		_, r.SnapshotKept = t.p.keptSnapshots.Load(r.PolicySnapshot)
	}
	if r.Time.IsZero() {
		r.Time = now.UTC()
	}
	body, err := json.Marshal(r)
	if err != nil {
		return audit.Sealed{}, fmt.Errorf("encode audit record: %w", err)
	}
	t.countAppend(r)
	// Inserted with COMMIT, with the transaction's other records
	// (commitWrites): nothing reads the audit table in a transaction.
	mac := ""
	if len(t.key) > 0 {
		mac = store.RowMAC(t.key, uint64(seq), body)
	}
	t.auditSeqs, t.auditBodies, t.auditMACs = append(t.auditSeqs, seq), append(t.auditBodies, body), append(t.auditMACs, mac)
	t.auditActors, t.auditKinds, t.auditAts = append(t.auditActors, pgKey(r.Actor)), append(t.auditKinds, pgKey(r.Kind)), append(t.auditAts, auditAt(r.Time))
	t.auditOwners = append(t.auditOwners, auditOwnerOf(r, body))
	return audit.Sealed{Seq: r.Seq, Body: body}, nil
}

// auditReserveSQL takes $2 record numbers at once for a window's
// transaction, one for each of its parts (each writes at least one
// record: a decision, an intent, an outcome), in the round trip of their
// fence checks: a part's first Append then costs no round trip of its
// own. As in Append, the transaction id is taken before the numbers, and
// a keyless writer of a signed chain takes none. A number left unused (a
// part left out, stale) is a gap the sealer fills with a void record, as
// a rolled-back transaction's. The count is read through a subquery so
// that no plan knows it (issue 33): a plan that did (a custom one) looked
// cheaper than the generic one, which estimates generate_series at 1,000
// rows, so the statement was planned again at every call (~0.35 plans a
// replay, ~60 µs each under load); now every plan is the same and the
// generic one is kept (TestPostgresAuditNumberingKeepsItsPlan).
const auditReserveSQL = `WITH h AS MATERIALIZED (SELECT signed OR mac <> '' AS signed FROM audit_head WHERE id = 1),
	x AS MATERIALIZED (SELECT pg_current_xact_id() FROM h WHERE $1 OR NOT h.signed)
	SELECT coalesce(array(SELECT nextval('audit_seq') FROM x, generate_series(1, (SELECT $2::int)) ORDER BY 1), '{}'), now()`

// scanReserved keeps the numbers auditReserveSQL took.
func (t *pgTx) scanReserved(row pgx.Row) error {
	var seqs []int64
	var now time.Time
	if err := row.Scan(&seqs, &now); err != nil {
		return fmt.Errorf("number audit records: %w", err)
	}
	t.reserved, t.start = append(t.reserved, seqs...), now.UTC()
	return nil
}

// settledThrough returns a record number n such that every transaction
// that took a number <= n has ended (committed or rolled back), waiting
// up to settleWait for the ones running; 0 when that could not be shown.
func (p *Postgres) settledThrough(ctx context.Context, q pgx.Tx) (uint64, error) {
	var last int64
	var called bool
	if err := q.QueryRow(ctx, `SELECT last_value, is_called FROM audit_seq`).Scan(&last, &called); err != nil {
		return 0, fmt.Errorf("read audit sequence: %w", err)
	}
	if !called {
		return 0, nil
	}
	// A transaction id taken now is above every id assigned before, and a
	// writer holding a number <= last took its id before that number. A
	// snapshot's running list holds every running id below its xmax, and
	// xmax is above this id once it has committed (a snapshot does not list
	// running ids at or above xmax: reading the list alone was not enough,
	// and a live record was once voided). So: wait until no snapshot lists
	// a running id below this one.
	var horizon string
	// (In a transaction of its own: the sealer's may hold an older id.)
	if err := p.pool.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&horizon); err != nil {
		return 0, fmt.Errorf("read transaction horizon: %w", err)
	}
	wait := settleWait
	if p.settleWait > 0 {
		wait = p.settleWait
	}
	deadline := time.Now().Add(wait)
	for {
		var running int
		if err := q.QueryRow(ctx, `SELECT count(*) FROM pg_snapshot_xip(pg_current_snapshot()) x
			WHERE x < $1::xid8 AND x IS DISTINCT FROM pg_current_xact_id_if_assigned()`, horizon).Scan(&running); err != nil {
			return 0, fmt.Errorf("read running transactions: %w", err)
		}
		if running == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return uint64(last), nil
}

// SealAudit chains the committed records after the sealed head, filling
// proven gaps with void records, and returns how many it sealed. With
// wait false it gives way when another process is sealing.
func (p *Postgres) SealAudit(ctx context.Context, wait bool) (int, error) {
	total := 0
	for {
		n, more, err := p.sealRound(ctx, wait)
		total += n
		if err != nil || !more {
			return total, err
		}
	}
}

func (p *Postgres) sealRound(ctx context.Context, wait bool) (sealed int, more bool, err error) {
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		sealed, more = 0, false
		if wait {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(lockSeal)); err != nil {
				return err
			}
		} else {
			var ok bool
			if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, int64(lockSeal)).Scan(&ok); err != nil || !ok {
				return err
			}
		}
		var headSeq int64
		var head, headMAC string
		var signed bool
		if err := tx.QueryRow(ctx, `SELECT seq, hash, mac, signed OR mac <> '' FROM audit_head WHERE id = 1 FOR UPDATE`).Scan(&headSeq, &head, &headMAC, &signed); err != nil {
			return fmt.Errorf("lock audit head: %w", err)
		}
		tail, err := readTail(ctx, tx, headSeq)
		if err != nil {
			return err
		}
		// Only a gap needs the proof that its number is settled (the
		// proof waits for the writers before it): seal up to the first
		// gap, or prove and read the tail again.
		settled := uint64(headSeq)
		for i, r := range tail {
			if r.seq != uint64(headSeq)+1+uint64(i) {
				if settled, err = p.settledThrough(ctx, tx); err != nil {
					return err
				}
				if tail, err = readTail(ctx, tx, headSeq); err != nil {
					return err
				}
				break
			}
		}
		if len(tail) == 0 {
			return nil
		}
		if signed && len(p.key) == 0 {
			return store.ErrAuditKeyRequired
		}
		if err := p.checkTail(signed, uint64(headSeq), head, headMAC, tail); err != nil {
			return err
		}
		now := time.Now().UTC()
		// Void records are new rows; the others get their links.
		var vseq, lseq, vat []int64
		var vbody [][]byte
		var vprev, vhash, lprev, lhash []string
		next := uint64(headSeq) + 1
		link := func(seq uint64, body []byte, void bool) {
			s := audit.Link(seq, head, body)
			if void {
				vseq, vbody, vprev, vhash = append(vseq, int64(seq)), append(vbody, body), append(vprev, head), append(vhash, s.Hash)
				vat = append(vat, auditAt(now))
			} else {
				lseq, lprev, lhash = append(lseq, int64(seq)), append(lprev, head), append(lhash, s.Hash)
			}
			head, next = s.Hash, seq+1
		}
	walk:
		for _, r := range tail {
			for next < r.seq {
				if next > settled {
					// A transaction holding this number may still commit.
					break walk
				}
				body, err := json.Marshal(&audit.Record{Seq: next, Time: now, Actor: "replayctl", Kind: KindVoid,
					Reason: "record number taken by a transaction that rolled back"})
				if err != nil {
					return err
				}
				link(next, body, true)
			}
			link(r.seq, r.body, false)
		}
		if next == uint64(headSeq)+1 {
			return nil
		}
		if len(vseq) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO audit (seq, body, prev, hash, actor, kind, at, owner)
				SELECT s, b, p, h, 'replayctl', '`+KindVoid+`', t, 0 FROM unnest($1::bigint[], $2::bytea[], $3::text[], $4::text[], $5::bigint[]) u(s, b, p, h, t)`,
				vseq, vbody, vprev, vhash, vat); err != nil {
				return fmt.Errorf("write void audit records: %w", err)
			}
		}
		if err := fillAuditCols(ctx, tx, tail, next); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE audit a SET prev = u.prev, hash = u.hash
			FROM unnest($1::bigint[], $2::text[], $3::text[]) u(seq, prev, hash) WHERE a.seq = u.seq`, lseq, lprev, lhash); err != nil {
			return fmt.Errorf("seal audit records: %w", err)
		}
		last := next - 1
		newMAC := ""
		if len(p.key) > 0 {
			newMAC = audit.HeadMAC(p.key, last, head)
		}
		if _, err := tx.Exec(ctx, `UPDATE audit_head SET seq = $1, hash = $2, mac = $3 WHERE id = 1`, int64(last), head, newMAC); err != nil {
			return fmt.Errorf("move audit head: %w", err)
		}
		sealed, more = int(last-uint64(headSeq)), len(tail) == sealBatch && next > tail[len(tail)-1].seq
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("seal audit chain: %w", err)
	}
	return sealed, more, nil
}

// checkTail authenticates what a keyed sealer is about to extend and
// sign: the head (as bbolt's writer does) and, on a signed chain, every
// record after it, which its writer signed. A row inserted by hand, or a
// head moved back over records then edited, is refused, not sealed.
func (p *Postgres) checkTail(signed bool, headSeq uint64, head, headMAC string, tail []tailRow) error {
	if len(p.key) == 0 {
		return nil
	}
	if headSeq > 0 && signed && headMAC == "" || !store.CheckHeadMAC(p.key, headSeq, head, headMAC) {
		return p.tamper.Refuse(headSeq, "the sealed head is not signed with this key (moved, or records under it rewritten)")
	}
	for _, r := range tail {
		// On an unsigned chain a row may carry no MAC (its writer had no
		// key), but one that carries a MAC must match it.
		if !signed && r.mac == "" {
			continue
		}
		if r.mac == "" || !hmac.Equal([]byte(r.mac), []byte(store.RowMAC(p.key, r.seq, r.body))) {
			return p.tamper.Refuse(r.seq, "an unsealed record is not signed with this key (inserted or changed outside replayctl)")
		}
	}
	return nil
}

type tailRow struct {
	seq  uint64
	body []byte
	mac  string
	// bare: the row came without its indexed columns (inserted outside
	// replayctl); the sealer fills them (pg_audit_index.go).
	bare bool
}

// readTail reads the committed records after the head, in number order.
func readTail(ctx context.Context, tx pgx.Tx, headSeq int64) ([]tailRow, error) {
	rows, err := tx.Query(ctx, `SELECT seq, body, coalesce(mac, ''), kind IS NULL FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2`, headSeq, sealBatch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var tail []tailRow
	for rows.Next() {
		var r tailRow
		var s int64
		if err := rows.Scan(&s, &r.body, &r.mac, &r.bare); err != nil {
			return nil, err
		}
		r.seq = uint64(s)
		tail = append(tail, r)
	}
	return tail, rows.Err()
}

// auditInsertSQL inserts the records a transaction appended, unchained.
// with their indexed columns (pg_audit_index.go).
const auditInsertSQL = `INSERT INTO audit (seq, body, mac, actor, kind, at, owner) SELECT s, b, nullif(m, ''), a, k, t, o
	FROM unnest($1::bigint[], $2::bytea[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[]) u(s, b, m, a, k, t, o)`

// pgAuditRowMACMigration: the MAC a keyed writer puts on each record it
// appends (NULL from a keyless writer of an unsigned chain).
const pgAuditRowMACMigration = `ALTER TABLE audit ADD COLUMN mac text;`

// auditWrite is the statement inserting the transaction's records, for
// COMMIT (commitWrites).
func (t *pgTx) auditWrite() (commitWrite, bool) {
	if len(t.auditSeqs) == 0 {
		return commitWrite{}, false
	}
	w := commitWrite{sql: auditInsertSQL, args: []any{t.auditSeqs, t.auditBodies, t.auditMACs, t.auditActors, t.auditKinds, t.auditAts, t.auditOwners}}
	t.auditSeqs, t.auditBodies, t.auditMACs = nil, nil, nil
	t.auditActors, t.auditKinds, t.auditAts, t.auditOwners = nil, nil, nil, nil
	return w, true
}

// markSigned records that a keyed process writes this store, before its
// first record is sealed: from then on keyless writers are refused.
func (p *Postgres) markSigned(ctx context.Context) error {
	if _, err := p.pool.Exec(ctx, `UPDATE audit_head SET signed = true WHERE id = 1 AND NOT signed`); err != nil {
		return fmt.Errorf("mark audit chain signed: %w", err)
	}
	return nil
}

// flushAudit seals the settled tail before a read, so that a process
// reads back what it wrote; a failure leaves the tail for the sealer.
func (p *Postgres) flushAudit(ctx context.Context) {
	_, _ = p.SealAudit(ctx, true)
}

// startSealer runs this process's sealer loop; each round one process
// wins the advisory lock and seals, the others skip the round.
func (p *Postgres) startSealer() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(sealEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// Errors are the next round's to retry (a keyless process
				// on a signed chain leaves the sealing to keyed ones).
				_, _ = p.SealAudit(ctx, false)
			}
		}
	}()
	return func() {
		cancel()
		<-done
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = p.SealAudit(fctx, true)
	}
}

// AuditUnsealed implements audit.TailReader: records written after the
// sealed head.
func (p *Postgres) AuditUnsealed(ctx context.Context) (int, error) {
	var n int
	err := p.pool.QueryRow(ctx, `SELECT count(*) FROM audit WHERE seq > (SELECT seq FROM audit_head WHERE id = 1)`).Scan(&n)
	return n, err
}

// AuditSignedHead implements audit.SignedHeadReader: the head moves while
// the sealer runs, so its MAC is read with it.
func (p *Postgres) AuditSignedHead(ctx context.Context) (uint64, string, string, error) {
	var seq int64
	var hash, mac string
	err := p.pool.QueryRow(ctx, `SELECT seq, hash, mac FROM audit_head WHERE id = 1`).Scan(&seq, &hash, &mac)
	return uint64(seq), hash, mac, err
}

// AuditTailForged implements audit.TailChecker: the first record after the
// sealed head that is not signed with key, on a signed chain (what the
// sealer refuses to seal); 0 when there is none.
func (p *Postgres) AuditTailForged(ctx context.Context, key []byte) (uint64, error) {
	if len(key) == 0 {
		return 0, nil
	}
	var found uint64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		var headSeq int64
		var signed bool
		if err := tx.QueryRow(ctx, `SELECT seq, signed OR mac <> '' FROM audit_head WHERE id = 1`).Scan(&headSeq, &signed); err != nil {
			return err
		}
		if !signed {
			return nil
		}
		tail, err := readTail(ctx, tx, headSeq)
		if err != nil {
			return err
		}
		for _, r := range tail {
			if r.mac == "" || !hmac.Equal([]byte(r.mac), []byte(store.RowMAC(key, r.seq, r.body))) {
				found = r.seq
				return nil
			}
		}
		return nil
	})
	return found, err
}

// ChainSucceeded is boltTx.ChainSucceeded on PostgreSQL: the first record
// about the entry ref (or the key) saying key's replay succeeded, sealed
// or not (a forged unsealed one only makes the runner refuse), read
// through audit_owner_col (pg_entry_audit.go, pg_audit_owner.go). A key holding a NUL cannot be
// read back as json text and is not checked.
func (t *pgTx) ChainSucceeded(ref, key string) (uint64, error) {
	if key == "" || strings.ContainsRune(key, 0) {
		return 0, nil
	}
	var seq int64
	err := t.queryRow(`SELECT coalesce(min(seq), 0) FROM audit
		WHERE owner = ANY($1::bigint[])
		  AND convert_from(body, 'UTF8')::json->>'ledger_after' = 'succeeded'
		  AND convert_from(body, 'UTF8')::json->>'idempotency_key' = $2`, []int64{ownerKey(refOwner(ref)), ownerKey(keyOwner(key))}, key).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("read the audit records of key %s: %w", key, err)
	}
	return uint64(seq), nil
}
