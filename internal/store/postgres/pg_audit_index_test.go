package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// appendSpread appends n records by four actors and three kinds, a
// minute apart from base, in transactions of 500.
func appendSpread(t testing.TB, p *Postgres, base time.Time, n int) {
	t.Helper()
	for done := 0; done < n; {
		if err := p.Update(context.Background(), func(tx store.Tx) error {
			for i := done; i < min(n, done+500); i++ {
				if _, err := tx.Append(&audit.Record{Time: base.Add(time.Duration(i) * time.Minute), Actor: []string{"ops-bot", "alice", "bob", "carol"}[i%4],
					Kind: []string{audit.KindDecision, audit.KindOutcome, audit.KindResolve}[i%3], EntryRef: fmt.Sprintf("jsonl:e%d", i%50)}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		done = min(n, done+500)
	}
	if _, err := p.SealAudit(context.Background(), true); err != nil {
		t.Fatal(err)
	}
}

// A database at schema version 15 (audit records without their indexed
// columns, no store_meta, no index by id) is migrated when a newer replayctl opens
// it: the columns are backfilled from the records, so AuditSeqs finds
// what a scan of the chain finds; a record a version-15 writer appends
// after the migration (no columns) is indexed by the sealer.
func TestPostgresMigratesAuditIndex(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	base := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	old := openPG(t, dsn, store.Options{})
	appendSpread(t, old, base, 1200)
	if _, err := old.pool.Exec(ctx, `DROP INDEX audit_actor, audit_kind, audit_at;
		ALTER TABLE audit DROP COLUMN actor, DROP COLUMN kind, DROP COLUMN at;
		DROP TABLE store_meta;
		DROP INDEX entries_ref_rev, entries_ref_hashed;
		DELETE FROM schema_migrations WHERE version IN (16, 17, 18)`); err != nil {
		t.Fatal(err)
	}
	old.Close()

	p := openPG(t, dsn, store.Options{})
	if v, err := p.SchemaVersion(ctx); err != nil || v != len(migrations) {
		t.Fatalf("schema version %d %v, want %d", v, err, len(migrations))
	}
	// A version-15 writer's row: no indexed columns.
	if _, err := p.pool.Exec(ctx, `INSERT INTO audit (seq, body) SELECT nextval('audit_seq'),
		convert_to('{"seq":' || currval('audit_seq') || ',"time":"2026-11-21T09:00:00Z","actor":"dave","kind":"approval"}', 'UTF8')`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SealAudit(ctx, true); err != nil {
		t.Fatal(err)
	}
	var chain []audit.Record
	if err := p.AuditRange(ctx, 1, func(_ uint64, s audit.Sealed, _ error) error {
		r, err := s.Open()
		chain = append(chain, r)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []store.AuditFilter{{Actor: "alice"}, {Actor: "dave"}, {Kind: audit.KindOutcome, Since: base.Add(10 * time.Hour)},
		{Since: base.Add(90 * time.Minute), Until: base.Add(95 * time.Minute)}, {Kind: audit.KindApproval}} {
		var want []uint64
		for _, r := range chain {
			if (f.Actor == "" || r.Actor == f.Actor) && (f.Kind == "" || r.Kind == f.Kind) &&
				(f.Since.IsZero() || !r.Time.Before(f.Since)) && (f.Until.IsZero() || !r.Time.After(f.Until)) {
				want = append(want, r.Seq)
			}
		}
		got, err := p.AuditSeqs(ctx, f)
		if err != nil || !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("after the migration, %+v: %v %v, want %v", f, got, err, want)
		}
	}
	if b, err := p.AuditBase(ctx); err != nil || b != nil {
		t.Fatalf("base %+v %v after the migration", b, err)
	}
}

// BenchmarkPostgresFilteredAuditPage: one console page (50 newest) of the
// records of one actor, over a chain of 20,000 records: read from the
// audit indexes (AuditSeqs + AuditRecords of the page) against the whole
// chain walked and matched, which is what a filtered page on PostgreSQL
// read before migration 16.
func BenchmarkPostgresFilteredAuditPage(b *testing.B) {
	ctx := context.Background()
	p, err := Open(ctx, testsvc.Postgres(b), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	appendSpread(b, p, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), 20_000)
	page := func(seqs []uint64) []uint64 { return slices.Clone(seqs[max(0, len(seqs)-50):]) }
	b.Run("whole-chain", func(b *testing.B) {
		for b.Loop() {
			var seqs []uint64
			if err := p.AuditRange(ctx, 1, func(seq uint64, s audit.Sealed, _ error) error {
				if r, err := s.Open(); err == nil && r.Actor == "alice" {
					seqs = append(seqs, seq)
				}
				return nil
			}); err != nil || len(page(seqs)) != 50 {
				b.Fatal(err)
			}
		}
	})
	b.Run("audit-index", func(b *testing.B) {
		for b.Loop() {
			seqs, err := p.AuditSeqs(ctx, store.AuditFilter{Actor: "alice"})
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			if err := p.AuditRecords(ctx, page(seqs), func(uint64, audit.Sealed, error) error { n++; return nil }); err != nil || n != 50 {
				b.Fatal(err)
			}
		}
	})
}

// RefsByID's statement can be answered from the indexes of migration 18
// (its generic plan included: the bounds are a range, not a LIKE
// pattern), not only by reading every entry.
func TestPostgresRefsByIDUsesTheIndex(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off; SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, `RESET enable_seqscan; RESET plan_cache_mode`)
	if _, err := conn.Exec(ctx, `PREPARE by_id(text, text) AS SELECT rec FROM entries WHERE (reverse(ref) COLLATE "C") >= $1 AND (reverse(ref) COLLATE "C") < $2
		UNION ALL SELECT rec FROM entries WHERE starts_with(ref, chr(1) || 'sha256:')`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, `DEALLOCATE by_id`)
	rows, err := conn.Query(ctx, `EXPLAIN EXECUTE by_id('70e', '70e`+"\U0010FFFF"+`')`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "entries_ref_rev") || !strings.Contains(plan, "entries_ref_hashed") || strings.Contains(plan, "Seq Scan") {
		t.Fatalf("plan:\n%s", plan)
	}
}
