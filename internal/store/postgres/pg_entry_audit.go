package postgres

import (
	"context"
	"fmt"

	"github.com/replayctl/replayctl/internal/audit"
)

// An entry's history on PostgreSQL (issue 16, "one entry"): dlq show and
// the console's audit page of an entry read the whole audit chain
// (AuditRange from 1: a read growing with every record ever written),
// as bbolt did before its per-entry index. audit_owner indexes each
// record under what bbolt's auditIndexKey indexes it under: its entry's
// ref, or, for a record naming no entry, its idempotency key; each as
// md5 (a btree entry has a size limit, a ref or key has none).
//
// The index reads the body as json, not jsonb (jsonb refuses the \u0000
// escape a NUL in a string becomes, and an index expression that fails
// fails the INSERT: an append). A body whose owner cannot be read is
// indexed under '?', and every entry's history reads those too and
// keeps the ones about it, so a history equals the chain's records about
// the entry whatever the bodies hold. The exception block is a
// subtransaction, which a parallel worker cannot start ("cannot start
// subtransactions during a parallel operation": a parallel index build
// of a large audit table, or a parallel scan calling it), so the
// function is PARALLEL UNSAFE. It can run again on a database
// taken back to an older version (as the version 8 test does).
const pgEntryAuditMigration = `CREATE OR REPLACE FUNCTION replayctl_audit_owner(body bytea) RETURNS text
	 LANGUAGE plpgsql IMMUTABLE PARALLEL UNSAFE AS $$
	 DECLARE d json;
	 BEGIN
	   d := convert_from(body, 'UTF8')::json;
	   IF coalesce(d->>'entry_ref', '') <> '' THEN RETURN 'r' || md5(d->>'entry_ref'); END IF;
	   IF coalesce(d->>'idempotency_key', '') <> '' THEN RETURN 'k' || md5(d->>'idempotency_key'); END IF;
	   RETURN NULL;
	 EXCEPTION WHEN others THEN
	   RETURN '?';
	 END $$;
	 CREATE INDEX IF NOT EXISTS audit_owner ON audit (replayctl_audit_owner(body), seq);`

// EntryAudit calls fn, oldest first, with the sealed audit records about
// one entry (as bolt.Bolt.EntryAudit): those naming its ref, and those
// naming no entry but its idempotency key (key may be ""). It reads the
// entry's ranges of audit_owner_col (the owner column, as the
// expression: pg_audit_owner.go), up to the sealed head as AuditRange.
//
// The owners are hashed from the ref's and the key's bytes, as the
// expression's reads hashed them (a text parameter cannot hold a NUL; a
// record holding one is indexed under '?').
func (p *Postgres) EntryAudit(ctx context.Context, ref, key string, fn func(seq uint64, rec audit.Sealed, decodeErr error) error) error {
	p.flushAudit(ctx)
	owners := []int64{ownerKey(refOwner(ref)), ownerKey("?")}
	if key != "" {
		owners = append(owners, ownerKey(keyOwner(key)))
	}
	rows, err := p.pool.Query(ctx, `SELECT seq, coalesce(prev, ''), coalesce(hash, ''), body FROM audit
		WHERE owner = ANY($1::bigint[])
		  AND seq <= (SELECT seq FROM audit_head WHERE id = 1) ORDER BY seq`, owners)
	if err != nil {
		return fmt.Errorf("read the audit records of %s: %w", ref, err)
	}
	var recs []audit.Sealed
	for rows.Next() {
		var s audit.Sealed
		var seq int64
		if err := rows.Scan(&seq, &s.Prev, &s.Hash, &s.Body); err != nil {
			rows.Close()
			return err
		}
		s.Seq = uint64(seq)
		recs = append(recs, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range recs {
		// A '?' record (or an md5 collision) about another entry.
		if r, err := s.Open(); err == nil && r.EntryRef != ref && (r.EntryRef != "" || key == "" || r.Key != key) {
			continue
		}
		if err := fn(s.Seq, s, nil); err != nil {
			return err
		}
	}
	return nil
}
