package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// The audit indexes on PostgreSQL: audit records by actor, kind and time,
// as bbolt's 'A', 'K' and 'T' views (bolt_views.go), so that a filtered
// audit page reads the page's records alone instead of the whole chain.
// The columns are written with the record by its writer (Append), by the
// sealer for the void records it inserts and for a row that came without
// them (a row inserted outside replayctl), and backfilled in Go for the
// records written before this version.
//
// actor and kind are stored as pgKey stores keys (a long one, or one
// holding NUL, by its hash), matched exactly as bbolt's store.ValKey index keys
// are. at is the record's time in Unix nanoseconds, bbolt's time order
// (a zero time first: math.MinInt64), so that a range's bounds cut
// exactly where bbolt's cut (timestamptz keeps microseconds).
const pgAuditIndexMigration = `ALTER TABLE audit ADD COLUMN actor text, ADD COLUMN kind text, ADD COLUMN at bigint;
	 CREATE INDEX audit_actor ON audit (actor, seq);
	 CREATE INDEX audit_kind ON audit (kind, seq);
	 CREATE INDEX audit_at ON audit (at, seq);`

// auditAt is t as the at column holds it.
func auditAt(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

// auditColsOf reads a stored body's indexed fields; an undecodable body is
// indexed under no actor or kind and the zero time (found by no filter,
// as bbolt never indexed one).
func auditColsOf(body []byte) (actor, kind string, at int64) {
	var r struct {
		Actor string    `json:"actor"`
		Kind  string    `json:"kind"`
		Time  time.Time `json:"time"`
	}
	if json.Unmarshal(body, &r) != nil {
		return "", "", math.MinInt64
	}
	return pgKey(r.Actor), pgKey(r.Kind), auditAt(r.Time)
}

// backfillAuditIndex fills the columns of the records written before
// migration 16, a thousand at a time.
func backfillAuditIndex(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `DECLARE backfill_audit NO SCROLL CURSOR FOR SELECT seq, body FROM audit WHERE kind IS NULL`); err != nil {
		return fmt.Errorf("backfill audit index: %w", err)
	}
	for {
		rows, err := tx.Query(ctx, `FETCH 1000 FROM backfill_audit`)
		if err != nil {
			return fmt.Errorf("backfill audit index: %w", err)
		}
		var seqs, ats []int64
		var actors, kinds []string
		for rows.Next() {
			var seq int64
			var body []byte
			if err := rows.Scan(&seq, &body); err != nil {
				rows.Close()
				return err
			}
			a, k, at := auditColsOf(body)
			seqs, actors, kinds, ats = append(seqs, seq), append(actors, a), append(kinds, k), append(ats, at)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(seqs) == 0 {
			break
		}
		if err := setAuditCols(ctx, tx, seqs, actors, kinds, ats); err != nil {
			return fmt.Errorf("backfill audit index: %w", err)
		}
	}
	_, err := tx.Exec(ctx, `CLOSE backfill_audit`)
	return err
}

func setAuditCols(ctx context.Context, tx pgx.Tx, seqs []int64, actors, kinds []string, ats []int64) error {
	_, err := tx.Exec(ctx, `UPDATE audit a SET actor = u.actor, kind = u.kind, at = u.at
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[]) u(seq, actor, kind, at) WHERE a.seq = u.seq`, seqs, actors, kinds, ats)
	return err
}

// AuditSeqs returns the seqs of the sealed audit records matching f,
// oldest first, from the audit indexes (as bolt.Bolt.AuditSeqs), reading
// no record.
func (p *Postgres) AuditSeqs(ctx context.Context, f store.AuditFilter) ([]uint64, error) {
	if f.Actor == "" && f.Kind == "" && f.Since.IsZero() && f.Until.IsZero() {
		return nil, fmt.Errorf("audit seqs: no indexed filter given")
	}
	p.flushAudit(ctx)
	var where []string
	var args []any
	arg := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "$", "$"+strconv.Itoa(len(args))))
	}
	if f.Actor != "" {
		arg("actor = $", pgKey(f.Actor))
	}
	if f.Kind != "" {
		arg("kind = $", pgKey(f.Kind))
	}
	if !f.Since.IsZero() {
		arg("at >= $", auditAt(f.Since))
	}
	if !f.Until.IsZero() {
		arg("at <= $", auditAt(f.Until))
	}
	rows, err := p.pool.Query(ctx, `SELECT seq FROM audit WHERE `+strings.Join(where, " AND ")+`
		AND seq <= (SELECT seq FROM audit_head WHERE id = 1) ORDER BY seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("audit seqs: %w", err)
	}
	seqs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (uint64, error) {
		var s int64
		err := r.Scan(&s)
		return uint64(s), err
	})
	if err != nil {
		return nil, fmt.Errorf("audit seqs: %w", err)
	}
	return seqs, nil
}

// AuditRecords calls fn with the sealed records of these seqs, in the
// order given (a page that AuditSeqs selected), without walking the
// chain. A seq with no sealed record is skipped.
func (p *Postgres) AuditRecords(ctx context.Context, seqs []uint64, fn func(seq uint64, rec audit.Sealed, decodeErr error) error) error {
	if len(seqs) == 0 {
		return nil
	}
	want := make([]int64, len(seqs))
	for i, s := range seqs {
		want[i] = int64(s)
	}
	rows, err := p.pool.Query(ctx, `SELECT seq, coalesce(prev, ''), coalesce(hash, ''), body FROM audit
		WHERE seq = ANY($1) AND seq <= (SELECT seq FROM audit_head WHERE id = 1)`, want)
	if err != nil {
		return fmt.Errorf("read audit records: %w", err)
	}
	got := map[uint64]audit.Sealed{}
	for rows.Next() {
		var s audit.Sealed
		var seq int64
		if err := rows.Scan(&seq, &s.Prev, &s.Hash, &s.Body); err != nil {
			rows.Close()
			return err
		}
		s.Seq = uint64(seq)
		got[s.Seq] = s
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, seq := range seqs {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, ok := got[seq]
		if !ok {
			continue
		}
		if err := fn(seq, s, nil); err != nil {
			return err
		}
	}
	return nil
}

// fillAuditCols gives the rows of tail the sealer is about to seal (those
// below next) that came without their indexed columns their columns.
func fillAuditCols(ctx context.Context, tx pgx.Tx, tail []tailRow, next uint64) error {
	var seqs, ats []int64
	var actors, kinds []string
	for _, r := range tail {
		if r.bare && r.seq < next {
			a, k, at := auditColsOf(r.body)
			seqs, actors, kinds, ats = append(seqs, int64(r.seq)), append(actors, a), append(kinds, k), append(ats, at)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	if err := setAuditCols(ctx, tx, seqs, actors, kinds, ats); err != nil {
		return fmt.Errorf("index audit records: %w", err)
	}
	return nil
}
