package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// Issue 29: flipping succeeded back to decided in the ledger passed audit
// verify, and the next reconcile re-sent all 30 keys. Verify now compares
// the ledger with the chain's outcome records, and the runner refuses to
// dispatch a key whose ledger contradicts the chain.
func TestEditedLedgerIsNotReplayedAgain(t *testing.T) {
	b := newBundle(t, baseRules)
	var entries []map[string]any
	for i := range 30 {
		entries = append(entries, transient(fmt.Sprintf("e%d", i), fmt.Sprintf("order-%d:email", i)))
	}
	src := b.jsonl("dlq.jsonl", entries...)
	if rep := b.run(b.reconciler(4), src); rep.Replays.Succeeded != 30 {
		t.Fatalf("first run: %+v", rep.Replays)
	}
	ctx := context.Background()
	if res, err := audit.Verify(ctx, b.store, nil); err != nil || !res.OK() {
		t.Fatalf("intact store: %+v %v", res, err)
	}

	// Someone with write access to the file flips every key back.
	path := filepath.Join(b.dir, "replayctl.db")
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		lb := tx.Bucket([]byte("ledger"))
		return lb.ForEach(func(k, v []byte) error {
			var r idempotency.Record
			if err := store.DecodeValue(v, &r); err != nil {
				return err
			}
			r.State = idempotency.Decided
			data, _ := json.Marshal(r)
			return lb.Put(k, data)
		})
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st, err := bolt.Open(path, store.Options{Now: b.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b.store = st

	res, err := audit.Verify(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || !strings.Contains(res.Break.Reason, "ledger") {
		t.Fatalf("verify passed an edited ledger: %+v", res)
	}
	b.run(b.reconciler(4), src)
	if n := len(b.sink.deliveries()); n != 30 {
		t.Fatalf("the edited ledger made the runner send again: %d deliveries, want 30", n)
	}
}

// The same on PostgreSQL: a ledger edited in the database is reported by
// verify and not sent again by the next worker.
func TestEditedLedgerIsNotReplayedAgainPostgres(t *testing.T) {
	b := newBundle(t, baseRules)
	dsn := testsvc.Postgres(t)
	pg, err := postgres.Open(context.Background(), dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	var entries []map[string]any
	for i := range 30 {
		entries = append(entries, transient(fmt.Sprintf("e%d", i), fmt.Sprintf("order-%d:email", i)))
	}
	src := b.jsonl("dlq.jsonl", entries...)
	ctx := context.Background()
	if _, err := b.worker(pg, "w0").Run(ctx, []source.Source{src}); err != nil {
		t.Fatal(err)
	}
	if n := len(b.sink.deliveries()); n != 30 {
		t.Fatalf("first run delivered %d, want 30", n)
	}
	if res, err := audit.Verify(ctx, pg, nil); err != nil || !res.OK() {
		t.Fatalf("intact store: %+v %v", res, err)
	}
	// Someone with write access to the database flips every key back.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := conn.Exec(ctx, `UPDATE ledger SET rec = convert_to(replace(convert_from(rec, 'UTF8'), '"state":"succeeded"', '"state":"decided"'), 'UTF8')`)
	conn.Close(ctx)
	if err != nil || tag.RowsAffected() != 30 {
		t.Fatalf("edit the ledger: %v rows, %v", tag, err)
	}
	res, err := audit.Verify(ctx, pg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || !strings.Contains(res.Break.Reason, "ledger") {
		t.Fatalf("verify passed an edited ledger: %+v", res)
	}
	if _, err := b.worker(pg, "w1").Run(ctx, []source.Source{src}); err != nil {
		t.Fatal(err)
	}
	if n := len(b.sink.deliveries()); n != 30 {
		t.Fatalf("the edited ledger made the runner send again: %d deliveries, want 30", n)
	}
}
