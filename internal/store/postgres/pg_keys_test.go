package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// incompressible returns n bytes that PostgreSQL cannot compress below
// its index limit (a repeated letter would fit compressed).
func incompressible(seed string, n int) string {
	var sb strings.Builder
	sum := sha256.Sum256([]byte(seed))
	for sb.Len() < n {
		sb.WriteString(hex.EncodeToString(sum[:]))
		sum = sha256.Sum256(sum[:])
	}
	return sb.String()[:n]
}

// Issue 14's leftover on PostgreSQL: a key, ref or approval id over the
// btree limit (~2.7 KB) made the insert fail ("index row size exceeds
// maximum"), as 32 KiB keys did in bbolt. Such keys, and keys a text
// column refuses (NUL, invalid UTF-8), are stored under their hash with
// the original kept in the record; a short key spelled like a hash does
// not collide with the key it is the hash of.
func TestPostgresStoresLongKeysUnderTheirHash(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	long := incompressible("key", 40*1024)
	keys := []string{long, "with\x00nul", "bad\xffutf8", pgKey(long)}
	e := entry.Entry{ID: incompressible("id", 40*1024), Source: "jsonl", IdempotencyKey: long, Payload: []byte(`{"a":1}`)}
	err := p.Update(ctx, func(tx store.Tx) error {
		for _, k := range keys {
			if _, err := tx.Transition(idempotency.Transition{Key: k, To: idempotency.Decided, EntryRef: "jsonl:" + k[:4]}); err != nil {
				return err
			}
		}
		if err := tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusPending}); err != nil {
			return err
		}
		return tx.PutApproval(&store.Approval{ID: long, EntryRef: e.Ref(), Key: long, State: store.ApprovalPending})
	})
	if err != nil {
		t.Fatalf("long keys: %v", err)
	}
	err = p.View(ctx, func(tx store.Tx) error {
		for _, k := range keys {
			r, err := tx.Ledger(k)
			// JSON keeps invalid UTF-8 as U+FFFD in the record, as in bbolt.
			if err != nil || r == nil || r.Key != strings.ToValidUTF8(k, "\uFFFD") {
				t.Errorf("ledger %.12q: %+v %v", k, r, err)
			}
		}
		er, err := tx.Entry(e.Ref())
		if err != nil || er == nil || er.Entry.ID != e.ID {
			t.Errorf("entry with a long id not read back (%v)", err)
		}
		a, err := tx.Approval(long)
		if err != nil || a == nil || a.Key != long {
			t.Errorf("approval with a long id not read back (%v)", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The claim path (ingest, claim by ref, release) takes long refs too.
	e2 := entry.Entry{ID: incompressible("id2", 40*1024), Source: "jsonl", IdempotencyKey: "k2", Payload: []byte(`{}`)}
	if n, err := p.Ingest(ctx, []*store.EntryRecord{{Entry: e2, Status: store.StatusPending}}); err != nil || n != 1 {
		t.Fatalf("ingest a long ref: %d %v", n, err)
	}
	c, ok, err := p.ClaimRef(ctx, e2.Ref(), "w1", time.Minute)
	if err != nil || !ok || c.Entry.Entry.ID != e2.ID {
		t.Fatalf("claim a long ref: %v %v", ok, err)
	}
	if owner, _, _, err := p.LeaseHolder(ctx, e2.Ref()); err != nil || owner != "w1" {
		t.Fatalf("lease of a long ref: %q %v", owner, err)
	}
	if err := p.Release(ctx, e2.Ref(), c.Token); err != nil {
		t.Fatal(err)
	}
	if owner, _, _, _ := p.LeaseHolder(ctx, e2.Ref()); owner != "" {
		t.Fatalf("long ref still leased to %s", owner)
	}
}

// A database written before keys were hashed holds long (compressible)
// keys as they were; the migration moves them where the store now looks,
// so an existing ledger record is found, never taken for a new key. The
// database is built with the migrations before pgKeysMigration, wherever
// it sits in the list (later ones then apply on top, as on an upgrade).
func TestPostgresMigrationMovesLongKeysToTheirHash(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	before := slices.Index(migrations, pgKeysMigration)
	if before < 0 {
		t.Fatal("pgKeysMigration is not in migrations")
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE schema_migrations (version int PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for v, m := range migrations[:before] {
		if _, err := pool.Exec(ctx, m); err != nil {
			t.Fatalf("migration %d: %v", v+1, err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, v+1); err != nil {
			t.Fatal(err)
		}
	}
	long := strings.Repeat("k", 2000)
	if _, err := pool.Exec(ctx, `INSERT INTO ledger (key, rec) VALUES ($1, $2)`, long, []byte(`{"key":"`+long+`","state":"succeeded"}`)); err != nil {
		t.Fatal(err)
	}
	q := openPG(t, dsn, store.Options{})
	v, err := q.LedgerView(ctx, long)
	if err != nil || v.State != "succeeded" {
		t.Fatalf("ledger record of a long key lost by the upgrade: %+v %v", v, err)
	}
}
