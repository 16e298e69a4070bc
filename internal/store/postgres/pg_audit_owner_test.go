package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// ownerMismatches counts the audit rows whose owner column is not the
// key of what replayctl_audit_owner (migration 12's index expression)
// reads from their body, and how many rows have each kind of owner by the
// expression ('r', 'k', '?', none; NULL: no owner column).
func ownerMismatches(t *testing.T, p *Postgres) (bad int, kinds map[string]int) {
	t.Helper()
	ctx := context.Background()
	rows, err := p.pool.Query(ctx, `SELECT coalesce(left(replayctl_audit_owner(body), 1), ''), owner IS NULL, owner IS DISTINCT FROM replayctl_owner_key(replayctl_audit_owner(body)) FROM audit`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	kinds = map[string]int{}
	for rows.Next() {
		var k string
		var null, differs bool
		if err := rows.Scan(&k, &null, &differs); err != nil {
			t.Fatal(err)
		}
		if null {
			k = "NULL"
		}
		kinds[k]++
		if differs {
			bad++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return bad, kinds
}

// appendOwners appends records of every shape the owner reads: by ref,
// by key alone, by neither; refs and keys with a NUL, invalid UTF-8,
// characters the encoder escapes, past the btree's size; a NUL in
// another field; a backslash before "u0000" that is not the escape.
func appendOwners(t *testing.T, p *Postgres) {
	t.Helper()
	refs := []string{"jsonl:a", "jsonl:n\x00ul", "jsonl:\xffbad", "jsonl:<&>\u2028", "cordum:" + strings.Repeat("c", 3000), ""}
	keys := []string{"k-a", "k\x00nul", "k\xfe", "", strings.Repeat("k", 3000)}
	reasons := []string{"plain", "a NUL \x00 in another field", `not an escape: \u0000`, `\\u0000`}
	if err := p.Update(context.Background(), func(tx store.Tx) error {
		for i := range 120 {
			r := &audit.Record{Kind: audit.KindDecision, Actor: "test", EntryRef: refs[i%len(refs)], Key: keys[i%len(keys)], Reason: reasons[i%len(reasons)]}
			if _, err := tx.Append(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SealAudit(context.Background(), true); err != nil {
		t.Fatal(err)
	}
}

// Issue 33: the writer puts each record's owner in a column instead of
// PostgreSQL reading it from the record for an expression index. The
// column holds what the expression read, for every shape of record, so
// an entry's history, a key's succeeded replay and a prune's last record
// times find exactly what they found. A row written without it (an older
// replayctl during an upgrade) and a body rewritten (a forgery) get it
// from the body.
func TestPostgresAuditOwnerIsTheExpressionsValue(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	appendOwners(t, p)
	if _, err := p.pool.Exec(ctx, `INSERT INTO audit (seq, body, actor, kind, at) SELECT nextval('audit_seq'),
		convert_to('{"seq":' || currval('audit_seq') || ',"actor":"old","kind":"decision","entry_ref":"jsonl:old"}', 'UTF8'), 'old', 'decision', 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.pool.Exec(ctx, `UPDATE audit SET body = convert_to(replace(convert_from(body, 'UTF8'), '"jsonl:a"', '"jsonl:forged"'), 'UTF8')
		WHERE seq = (SELECT min(seq) FROM audit WHERE convert_from(body, 'UTF8') LIKE '%"jsonl:a"%')`); err != nil {
		t.Fatal(err)
	}
	bad, kinds := ownerMismatches(t, p)
	if bad != 0 {
		t.Errorf("%d of %d rows hold another owner than replayctl_audit_owner reads", bad, 121)
	}
	for _, k := range []string{"r", "k", "?", ""} {
		if kinds[k] == 0 {
			t.Errorf("no record owned as %q (%v): the records do not cover it", k, kinds)
		}
	}
	var forged int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM audit WHERE owner = $1`, ownerKey(refOwner("jsonl:forged"))).Scan(&forged); err != nil || forged != 1 {
		t.Errorf("the rewritten record is owned by its new ref %d times (%v), want once", forged, err)
	}
}

// A database at schema version 19 (the owner as an expression index) is
// migrated when a newer replayctl opens it: its records get the column,
// the expression's index is dropped, and an entry's history is the one
// it was (read before the database was taken back to version 19).
func TestPostgresMigratesAuditOwner(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	history := func(p *Postgres) string {
		var out []string
		for _, ref := range []string{"jsonl:a", "jsonl:n\x00ul", "cordum:" + strings.Repeat("c", 3000)} {
			var seqs []uint64
			if err := p.EntryAudit(ctx, ref, "k-a", func(seq uint64, _ audit.Sealed, _ error) error {
				seqs = append(seqs, seq)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(seqs))
		}
		return strings.Join(out, " ")
	}
	old := openPG(t, dsn, store.Options{})
	appendOwners(t, old)
	before := history(old)
	if _, err := old.pool.Exec(ctx, `DROP TRIGGER audit_owner_ins ON audit; DROP TRIGGER audit_owner_upd ON audit;
		DROP FUNCTION replayctl_audit_owner_col(); DROP INDEX audit_owner_col; ALTER TABLE audit DROP COLUMN owner;
		DROP FUNCTION replayctl_owner_key(text);
		CREATE INDEX audit_owner ON audit (replayctl_audit_owner(body), seq);
		DELETE FROM schema_migrations WHERE version = 20`); err != nil {
		t.Fatal(err)
	}
	old.Close()

	p := openPG(t, dsn, store.Options{})
	if v, err := p.SchemaVersion(ctx); err != nil || v != len(migrations) {
		t.Fatalf("schema version %d %v, want %d", v, err, len(migrations))
	}
	if bad, kinds := ownerMismatches(t, p); bad != 0 || kinds["NULL"] != 0 {
		t.Errorf("after the migration %d rows hold another owner than the expression reads (%v)", bad, kinds)
	}
	var left int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename = 'audit' AND indexname = 'audit_owner'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("the expression's index is still there (%d, %v)", left, err)
	}
	if after := history(p); after != before || before == "[] [] []" {
		t.Errorf("histories %s after the migration, %s before", after, before)
	}
}
