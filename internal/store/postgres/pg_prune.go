package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
)

// Retention on PostgreSQL (issue 32), in bbolt's steps (prune.go): the
// pending mark and the chain's base are rows of store_meta; the archive
// is written from one REPEATABLE READ snapshot; entries and approvals
// leave in batched transactions that lock and re-check each row and take
// the entries out of the counters (in Go, as every entry write does); the
// audit records up to the base leave in batched DELETEs after the base has
// moved. Records after the sealed head are never archived nor removed.

// pgPruneMigration keeps what bbolt keeps in its meta bucket for a prune:
// the base of a pruned chain and a pending prune's mark.
const pgPruneMigration = `CREATE TABLE store_meta (key text PRIMARY KEY, value bytea NOT NULL);`

const (
	metaAuditBase    = "audit_base"
	metaPrunePending = "prune_pending"
	// lockBase orders two prunes moving the base.
	lockBase int64 = 0x7265706c61790005
)

// pgReader is what a prune reads through: the pool or a transaction.
type pgReader interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Prune moves what retention lets go into an archive, then removes it
// (prune.go says in which order, so that a kill loses nothing).
func (p *Postgres) Prune(ctx context.Context, o store.PruneOptions) (*store.PruneResult, error) {
	return store.Prune(ctx, p, o)
}

// AuditBase implements audit.BaseReader: the base of a pruned chain, nil
// when nothing was pruned.
func (p *Postgres) AuditBase(ctx context.Context) (*audit.Checkpoint, error) {
	return readPGBase(ctx, p.pool)
}

func readPGBase(ctx context.Context, q pgReader) (*audit.Checkpoint, error) {
	cp, err := scanJSON[audit.Checkpoint](q.QueryRow(ctx, `SELECT value FROM store_meta WHERE key = $1`, metaAuditBase))
	if err != nil {
		return nil, fmt.Errorf("audit base: %w", err)
	}
	return cp, nil
}

func (p *Postgres) PendingPrune(ctx context.Context) (*store.PrunePending, error) {
	return scanJSON[store.PrunePending](p.pool.QueryRow(ctx, `SELECT value FROM store_meta WHERE key = $1`, metaPrunePending))
}

// SetPending writes (nil: clears) the pending prune's mark.
func (p *Postgres) SetPending(ctx context.Context, pend *store.PrunePending) error {
	var err error
	if pend == nil {
		_, err = p.pool.Exec(ctx, `DELETE FROM store_meta WHERE key = $1`, metaPrunePending)
	} else {
		var data []byte
		if data, err = json.Marshal(pend); err == nil {
			_, err = p.pool.Exec(ctx, `INSERT INTO store_meta (key, value) VALUES ($1, $2)
				ON CONFLICT (key) DO UPDATE SET value = excluded.value`, metaPrunePending, data)
		}
	}
	if err != nil {
		return fmt.Errorf("mark the prune: %w", err)
	}
	return nil
}

// auditOwner is the owner key of an entry's records (the owner column,
// pg_audit_owner.go, as replayctl_audit_owner read it, pg_entry_audit.go).
func auditOwner(ref string) int64 { return ownerKey(refOwner(ref)) }

// lastAuditTimes returns, for each of refs that has one, the time of the
// last audit record about it (by number, sealed or not), from audit_owner_col:
// bbolt's lastAuditTime for many entries in one round trip.
func lastAuditTimes(ctx context.Context, q pgReader, refs []string) (map[string]time.Time, error) {
	owners := make([]int64, len(refs))
	byOwner := make(map[int64]string, len(refs))
	for i, ref := range refs {
		owners[i] = auditOwner(ref)
		byOwner[owners[i]] = ref
	}
	rows, err := q.Query(ctx, `SELECT DISTINCT ON (owner) owner, at FROM audit
		WHERE owner = ANY($1) ORDER BY owner, seq DESC`, owners)
	if err != nil {
		return nil, fmt.Errorf("last audit records: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var o int64
		var at *int64
		if err := rows.Scan(&o, &at); err != nil {
			return nil, err
		}
		if at != nil && *at != math.MinInt64 {
			out[byOwner[o]] = time.Unix(0, *at).UTC()
		}
	}
	return out, rows.Err()
}

// pgEntryRow is an entry row as a prune reads it.
type pgEntryRow struct {
	key     string // the stored ref (pgKey)
	rec     *store.EntryRecord
	raw     []byte
	payload []byte
	sig     *string
	seen    pgtype.Timestamptz
}

// readEntryRows reads the rows of these stored refs (locked when lock).
func readEntryRows(ctx context.Context, q pgReader, keys []string, lock bool) (map[string]*pgEntryRow, error) {
	sql := `SELECT ref, rec, payload, sig, seen FROM entries WHERE ref = ANY($1)`
	if lock {
		sql += ` ORDER BY ref FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, keys)
	if err != nil {
		return nil, fmt.Errorf("read entries: %w", err)
	}
	defer rows.Close()
	out := map[string]*pgEntryRow{}
	for rows.Next() {
		r := &pgEntryRow{}
		if err := rows.Scan(&r.key, &r.raw, &r.payload, &r.sig, &r.seen); err != nil {
			return nil, err
		}
		if r.rec, err = decodeEntryBytes(r.raw, r.payload); err != nil {
			continue // left in place, as bbolt leaves an entry it cannot read
		}
		out[r.key] = r
	}
	return out, rows.Err()
}

// prunableRows says which of rows may leave (by stored ref).
func prunableRows(ctx context.Context, q pgReader, rows map[string]*pgEntryRow, before time.Time) (map[string]bool, error) {
	refs := make([]string, 0, len(rows))
	for _, r := range rows {
		if !store.IsOpen(r.rec.Status) && r.rec.WriteBackPending == "" {
			refs = append(refs, r.rec.Entry.Ref())
		}
	}
	out := make(map[string]bool, len(rows))
	if len(refs) == 0 {
		return out, nil
	}
	last, err := lastAuditTimes(ctx, q, refs)
	if err != nil {
		return nil, err
	}
	for k, r := range rows {
		t, ok := last[r.rec.Entry.Ref()]
		out[k] = store.ClosedBefore(r.rec, t, ok, before)
	}
	return out, nil
}

// writeArchive writes the archive from one REPEATABLE READ snapshot
// (store.WriteArchiveFile), after sealing what is settled.
func (p *Postgres) WriteArchive(ctx context.Context, path string, o store.PruneOptions) (*store.PruneResult, *audit.Checkpoint, bool, error) {
	p.flushAudit(ctx)
	return store.WriteArchiveFile(path, o, func(w *audit.ArchiveWriter, res *store.PruneResult) (*audit.Checkpoint, error) {
		var base *audit.Checkpoint
		err := pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			a := &pgArchiver{tx: tx, w: w, before: o.Before, res: res, pruned: map[string]bool{}}
			if err := a.auditPrefix(ctx, time.Now().UTC()); err != nil {
				return err
			}
			if err := a.entries(ctx); err != nil {
				return err
			}
			if err := a.approvals(ctx); err != nil {
				return err
			}
			base = a.base
			return nil
		})
		return base, err
	})
}

// pgArchiver writes one prune's archive from one snapshot.
type pgArchiver struct {
	tx     pgx.Tx
	w      *audit.ArchiveWriter
	before time.Time
	res    *store.PruneResult
	base   *audit.Checkpoint
	// pruned are the stored refs of the entries archived.
	pruned map[string]bool
}

// auditPrefix writes the header and the chain's sealed prefix, as
// bbolt's archiver does: the records before the cut, up to the first that
// names an entry staying in the store, never the head; verified as read.
func (a *pgArchiver) auditPrefix(ctx context.Context, now time.Time) error {
	prev, err := readPGBase(ctx, a.tx)
	if err != nil {
		return err
	}
	v, from, err := store.ArchiveHeader(a.w, prev, a.before, now)
	if err != nil {
		return err
	}
	var head int64
	if err := a.tx.QueryRow(ctx, `SELECT seq FROM audit_head WHERE id = 1`).Scan(&head); err != nil {
		return fmt.Errorf("read audit head: %w", err)
	}
	stays := map[string]bool{} // by ref, a bounded cache
	for {
		page, err := readSealedPage(ctx, a.tx, from, uint64(head))
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		recs := make([]audit.Record, len(page))
		var ask []string
		for i, sealed := range page {
			if err := ctx.Err(); err != nil {
				return err
			}
			if b := v.Next(sealed.Seq, sealed); b != nil {
				return fmt.Errorf("%w: nothing was pruned (a broken chain is not archived)", b)
			}
			if recs[i], err = sealed.Open(); err != nil {
				return err
			}
			if ref := recs[i].EntryRef; ref != "" {
				if _, seen := stays[ref]; !seen {
					ask = append(ask, ref)
				}
			}
		}
		if err := a.whoStays(ctx, ask, stays); err != nil {
			return err
		}
		for i, sealed := range page {
			rec := &recs[i]
			if !rec.Time.Before(a.before) || sealed.Seq >= uint64(head) {
				return nil
			}
			if ref := rec.EntryRef; ref != "" && stays[ref] {
				a.res.HeldAt, a.res.HeldBy = sealed.Seq, ref
				return nil
			}
			if err := a.w.Write(&audit.ArchiveLine{Type: audit.LineAudit, Seq: sealed.Seq, Prev: sealed.Prev, Hash: sealed.Hash, Record: sealed.Body}); err != nil {
				return err
			}
			a.res.Audit++
			a.base = &audit.Checkpoint{Seq: sealed.Seq, Head: sealed.Hash, Time: now}
			from = sealed.Seq + 1
		}
		if len(stays) > 100_000 {
			clear(stays)
		}
	}
}

// whoStays fills stays for refs: an entry stays when it is stored and
// may not leave.
func (a *pgArchiver) whoStays(ctx context.Context, refs []string, stays map[string]bool) error {
	if len(refs) == 0 {
		return nil
	}
	keys := make([]string, len(refs))
	for i, ref := range refs {
		keys[i] = pgKey(ref)
	}
	rows, err := readEntryRows(ctx, a.tx, keys, false)
	if err != nil {
		return err
	}
	ok, err := prunableRows(ctx, a.tx, rows, a.before)
	if err != nil {
		return err
	}
	for i, ref := range refs {
		_, stored := rows[keys[i]]
		stays[ref] = stored && !ok[keys[i]]
	}
	return nil
}

// readSealedPage reads up to 1000 sealed records from seq from on.
func readSealedPage(ctx context.Context, q pgReader, from, head uint64) ([]audit.Sealed, error) {
	rows, err := q.Query(ctx, `SELECT seq, coalesce(prev, ''), coalesce(hash, ''), body FROM audit
		WHERE seq >= $1 AND seq <= $2 ORDER BY seq LIMIT 1000`, int64(from), int64(head))
	if err != nil {
		return nil, fmt.Errorf("read audit records: %w", err)
	}
	defer rows.Close()
	var page []audit.Sealed
	for rows.Next() {
		var s audit.Sealed
		var seq int64
		if err := rows.Scan(&seq, &s.Prev, &s.Hash, &s.Body); err != nil {
			return nil, err
		}
		s.Seq = uint64(seq)
		page = append(page, s)
	}
	return page, rows.Err()
}

// entries writes every prunable entry, payload included, and its key's
// ledger record, a page of closed entries at a time.
func (a *pgArchiver) entries(ctx context.Context) error {
	after := ""
	for {
		rows, err := a.tx.Query(ctx, `SELECT ref FROM entries WHERE state IN ($1, $2) AND ref > $3 ORDER BY ref LIMIT 1000`,
			store.StatusReplayed, store.StatusResolved, after)
		if err != nil {
			return fmt.Errorf("read closed entries: %w", err)
		}
		keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("read closed entries: %w", err)
		}
		if len(keys) == 0 {
			return nil
		}
		after = keys[len(keys)-1]
		page, err := readEntryRows(ctx, a.tx, keys, false)
		if err != nil {
			return err
		}
		ok, err := prunableRows(ctx, a.tx, page, a.before)
		if err != nil {
			return err
		}
		var ledgerKeys []string
		for _, k := range keys {
			if r := page[k]; ok[k] && r.rec.Entry.IdempotencyKey != "" {
				ledgerKeys = append(ledgerKeys, pgKey(r.rec.Entry.IdempotencyKey))
			}
		}
		ledger := map[string][]byte{}
		if len(ledgerKeys) > 0 {
			lrows, err := a.tx.Query(ctx, `SELECT key, rec FROM ledger WHERE key = ANY($1)`, ledgerKeys)
			if err != nil {
				return fmt.Errorf("read ledger records: %w", err)
			}
			for lrows.Next() {
				var k string
				var rec []byte
				if err := lrows.Scan(&k, &rec); err != nil {
					lrows.Close()
					return err
				}
				ledger[k] = rec
			}
			lrows.Close()
			if err := lrows.Err(); err != nil {
				return err
			}
		}
		for _, k := range keys {
			if err := ctx.Err(); err != nil {
				return err
			}
			r := page[k]
			if !ok[k] {
				continue
			}
			data, err := json.Marshal(r.rec)
			if err != nil {
				return err
			}
			if err := a.w.Write(&audit.ArchiveLine{Type: audit.LineEntry, Entry: data}); err != nil {
				return err
			}
			a.res.Entries++
			a.pruned[r.rec.Entry.Ref()] = true
			key := r.rec.Entry.IdempotencyKey
			if key == "" {
				continue
			}
			if raw := ledger[pgKey(key)]; raw != nil {
				// Re-encoded as bbolt's archive holds it.
				lr, err := decodeJSON[idempotency.Record](raw)
				if err != nil || lr == nil {
					continue
				}
				data, err := json.Marshal(lr)
				if err != nil {
					return err
				}
				if err := a.w.Write(&audit.ArchiveLine{Type: audit.LineLedger, Ledger: data}); err != nil {
					return err
				}
				a.res.Ledger++
			}
		}
	}
}

// approvals writes the approval requests of the entries archived.
func (a *pgArchiver) approvals(ctx context.Context) error {
	if len(a.pruned) == 0 {
		return nil
	}
	rows, err := a.tx.Query(ctx, `SELECT rec FROM approvals ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read approvals: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return err
		}
		var ap store.Approval
		if json.Unmarshal(raw, &ap) != nil || !a.pruned[ap.EntryRef] {
			continue // an approval of an entry that stays (or is gone already) stays
		}
		data, err := json.Marshal(&ap)
		if err != nil {
			return err
		}
		if err := a.w.Write(&audit.ArchiveLine{Type: audit.LineApproval, Approval: data}); err != nil {
			return err
		}
		a.res.Approvals++
	}
	return rows.Err()
}

// SizeNow is the database's size after a prune.
func (p *Postgres) SizeNow(ctx context.Context) (int64, error) {
	var n int64
	err := p.pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&n)
	return n, err
}

// RemoveBatch removes, in one transaction, the approvals and entries
// named that still qualify, locking each row and checking it again; the
// entries leave the counters in the same transaction.
func (p *Postgres) RemoveBatch(ctx context.Context, refs, approvalIDs []string, before time.Time, res *store.PruneResult) error {
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		// This transaction counts its entry deletes itself (the trigger
		// left for older binaries skips them).
		if _, err := tx.Exec(ctx, setCountsInGo); err != nil {
			return err
		}
		ids := make([]string, len(approvalIDs))
		for i, id := range approvalIDs {
			ids[i] = pgKey(id)
		}
		aps := map[string]*store.Approval{}
		var entryKeys []string
		if len(ids) > 0 {
			rows, err := tx.Query(ctx, `SELECT id, rec FROM approvals WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
			if err != nil {
				return fmt.Errorf("lock approvals: %w", err)
			}
			for rows.Next() {
				var id string
				var raw []byte
				if err := rows.Scan(&id, &raw); err != nil {
					rows.Close()
					return err
				}
				var a store.Approval
				if json.Unmarshal(raw, &a) == nil {
					aps[id] = &a
					entryKeys = append(entryKeys, pgKey(a.EntryRef))
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		for _, ref := range refs {
			entryKeys = append(entryKeys, pgKey(ref))
		}
		rows, err := readEntryRows(ctx, tx, entryKeys, true)
		if err != nil {
			return err
		}
		ok, err := prunableRows(ctx, tx, rows, before)
		if err != nil {
			return err
		}
		var delApprovals []string
		for _, id := range ids {
			a := aps[id]
			if a == nil {
				continue
			}
			if k := pgKey(a.EntryRef); rows[k] != nil && !ok[k] {
				continue // its entry stays: so does it
			}
			delApprovals = append(delApprovals, id)
		}
		var delEntries []string
		delta := entryDelta{}
		for _, ref := range refs {
			k := pgKey(ref)
			r := rows[k]
			if r == nil || !ok[k] {
				continue // changed since it was archived: it stays (and is in the archive too)
			}
			keys, err := storedKeys(r.raw, r.sig, r.seen)
			if err != nil {
				return fmt.Errorf("entry %s: %w", ref, err)
			}
			delta.add(&keys, nil)
			delEntries = append(delEntries, k)
		}
		if len(delApprovals) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM approvals WHERE id = ANY($1)`, delApprovals); err != nil {
				return fmt.Errorf("remove approvals: %w", err)
			}
		}
		if len(delEntries) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM entries WHERE ref = ANY($1)`, delEntries); err != nil {
				return fmt.Errorf("remove entries: %w", err)
			}
			var cr countRows
			delta.appendTo(&cr, "")
			if len(cr.dims) > 0 {
				if _, err := tx.Exec(ctx, entryCountsSQL, cr.args()...); err != nil {
					return fmt.Errorf("count removed entries: %w", err)
				}
			}
		}
		res.Approvals += len(delApprovals)
		res.Entries += len(delEntries)
		return nil
	})
}

// MoveBase makes b the chain's base (when it is ahead of the current one)
// and removes the records up to it in batched DELETEs.
func (p *Postgres) MoveBase(ctx context.Context, b *audit.Checkpoint, batch int, afterBase func()) (int, error) {
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockBase); err != nil {
			return err
		}
		cur, err := readPGBase(ctx, tx)
		if err != nil || cur != nil && cur.Seq >= b.Seq {
			return err
		}
		// The base must be a record of this chain: the archive was written
		// from it, and nothing rewrites the sealed chain in between.
		var hash *string
		err = tx.QueryRow(ctx, `SELECT hash FROM audit WHERE seq = $1`, int64(b.Seq)).Scan(&hash)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case hash == nil || *hash != b.Head:
			return fmt.Errorf("record %d is not the archive's base any more: nothing of the chain was removed", b.Seq)
		}
		data, err := json.Marshal(b)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO store_meta (key, value) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, metaAuditBase, data)
		return err
	})
	if err != nil {
		return 0, err
	}
	if afterBase != nil {
		afterBase()
	}
	removed := 0
	for {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		tag, err := p.pool.Exec(ctx, `DELETE FROM audit WHERE seq IN (SELECT seq FROM audit WHERE seq <= $1 ORDER BY seq LIMIT $2)`, int64(b.Seq), batch)
		if err != nil {
			return removed, err
		}
		n := int(tag.RowsAffected())
		removed += n
		if n < batch {
			return removed, nil
		}
	}
}
