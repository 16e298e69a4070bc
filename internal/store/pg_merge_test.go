package store

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// mergeWrites sends writes as one statement only when each changes a row
// of its own without a check: a statement changes a row at most once and
// its parts do not see each other's changes. Parameters are renumbered.
func TestMergeWritesOnlyDistinctUncheckedRows(t *testing.T) {
	row := func(target, sql string, args ...any) pgWrite {
		return pgWrite{what: "write " + target, sql: sql, args: args, target: target}
	}
	ledger := row("ledger:k", `UPDATE ledger SET rec = $2 WHERE key = $1`, "k", []byte("l"))
	ent := row("entries:r", `UPDATE entries SET rec = $2 WHERE ref = $1`, "r", []byte("e"))
	rec := row("audit", `INSERT INTO audit (seq, body) SELECT * FROM unnest($1::bigint[], $2::bytea[])`, []int64{1}, [][]byte{[]byte("b")})
	got := mergeWrites([]pgWrite{ledger, ent, rec})
	if len(got) != 1 {
		t.Fatalf("three writes of three rows: %d statements", len(got))
	}
	want := `WITH w0 AS (UPDATE ledger SET rec = $2 WHERE key = $1), w1 AS (UPDATE entries SET rec = $4 WHERE ref = $3) INSERT INTO audit (seq, body) SELECT * FROM unnest($5::bigint[], $6::bytea[])`
	if got[0].sql != want {
		t.Errorf("merged:\n%s\nwant\n%s", got[0].sql, want)
	}
	if wantArgs := append(append(append([]any{}, ledger.args...), ent.args...), rec.args...); !reflect.DeepEqual(got[0].args, wantArgs) {
		t.Errorf("merged args %v, want %v", got[0].args, wantArgs)
	}
	if got[0].what != "write ledger:k, write entries:r, write audit" {
		t.Errorf("merged write says %q", got[0].what)
	}
	checked := ent
	checked.check = func(pgconn.CommandTag) error { return nil }
	many := []pgWrite{}
	for i := range maxMerged + 1 {
		many = append(many, row(fmt.Sprintf("entries:r%d", i), ent.sql, ent.args...))
	}
	for name, ws := range map[string][]pgWrite{
		"one row twice":    {ledger, ent, ent},
		"a checked write":  {ledger, checked},
		"an untargeted":    {ledger, {what: "x", sql: ent.sql, args: ent.args}},
		"a WITH":           {ledger, row("entries:x", "WITH a AS (SELECT 1) UPDATE entries SET rec = $1", []byte("e"))},
		"more than merged": many,
	} {
		if got := mergeWrites(ws); !reflect.DeepEqual(got, ws) {
			t.Errorf("%s: merged into %d statements", name, len(got))
		}
	}
}

// A replay's transaction under a claim sends its ledger and entry rows,
// its audit record and the counter rows as one statement with COMMIT
// (five statements before), and what is stored is what it was: the
// ledger's and the entry's new rows, the record as Append returned it,
// counters equal to a recount.
func TestPostgresCommitWritesRowsRecordsAndCountersInOneStatement(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), Options{})
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	e := mixedEntry(0, base)
	ref, key := e.Entry.Ref(), e.Entry.IdempotencyKey
	if _, err := p.Ingest(ctx, []*EntryRecord{e}); err != nil {
		t.Fatal(err)
	}
	if err := p.Update(ctx, func(tx Tx) error {
		_, err := tx.Transition(idempotency.Transition{Key: key, To: idempotency.Decided, EntryRef: ref})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c, ok, err := p.ClaimRef(ctx, ref, "w0", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	before := p.Trips()
	var sealed audit.Sealed
	if err := p.Update(WithFence(ctx, Fence{Ref: ref, Token: c.Token, Key: key}), func(tx Tx) error {
		if _, err := tx.Transition(idempotency.Transition{Key: key, From: idempotency.Decided, To: idempotency.Dispatching, Owner: "w0"}); err != nil {
			return err
		}
		var err error
		if sealed, err = tx.Append(&audit.Record{Actor: "w0", Kind: audit.KindOutcome, EntryRef: ref, Key: key, Outcome: "succeeded"}); err != nil {
			return err
		}
		er, err := tx.Entry(ref)
		if err != nil || er == nil {
			return fmt.Errorf("read %s: %v", ref, err)
		}
		er.Status = StatusQuarantined
		return tx.PutEntry(er)
	}); err != nil {
		t.Fatal(err)
	}
	after := p.Trips()
	writes := 0
	for sql, n := range after.ByStatement {
		if n == before.ByStatement[sql] || !regexpWrites.MatchString(sql) {
			continue
		}
		writes += int(n - before.ByStatement[sql])
		for _, part := range []string{"update ledger", "update entries", "insert into audit (", "insert into audit_counts", "insert into entry_counts"} {
			if !strings.Contains(sql, part) {
				t.Errorf("the transaction's writes went apart: %s has no %q", sql, part)
			}
		}
	}
	if writes != 1 {
		t.Errorf("%d statements wrote, want 1", writes)
	}

	var got *EntryRecord
	var led *idempotency.Record
	if err := p.View(ctx, func(tx Tx) (err error) {
		if got, err = tx.Entry(ref); err != nil {
			return err
		}
		led, err = tx.Ledger(key)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Status != StatusQuarantined || led == nil || led.State != idempotency.Dispatching {
		t.Errorf("stored entry %+v, ledger %+v", got, led)
	}
	if _, err := p.SealAudit(ctx, true); err != nil {
		t.Fatal(err)
	}
	if res, err := audit.Verify(ctx, p, nil); err != nil || !res.OK() || res.Records != 1 {
		t.Fatalf("verify: %+v, %v", res, err)
	}
	if err := p.AuditRange(ctx, 1, func(seq uint64, s audit.Sealed, err error) error {
		if err == nil && (seq != sealed.Seq || string(s.Body) != string(sealed.Body)) {
			t.Errorf("record %d stored as %s, Append returned %s", seq, s.Body, sealed.Body)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	assertCountersEqualRecount(t, p, base, base.Add(48*time.Hour))
}

// An entry written twice in one transaction is not merged into one
// statement (which would change the row once, either way): the last
// write is the one stored, counted once.
func TestPostgresOneRowWrittenTwiceKeepsTheLastWrite(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), Options{})
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	e := mixedEntry(1, base)
	ref := e.Entry.Ref()
	// mixedEntry(2) stays open (the recount and the counters differ on
	// how they say none is).
	if _, err := p.Ingest(ctx, []*EntryRecord{e, mixedEntry(2, base)}); err != nil {
		t.Fatal(err)
	}
	if err := p.Update(ctx, func(tx Tx) error {
		er, err := tx.Entry(ref)
		if err != nil || er == nil {
			return fmt.Errorf("read %s: %v", ref, err)
		}
		// Both writes wait for COMMIT: no read between them sends the first.
		for _, status := range []string{StatusQuarantined, StatusReplayed} {
			er.Status = status
			if err := tx.PutEntry(er); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got *EntryRecord
	if err := p.View(ctx, func(tx Tx) (err error) { got, err = tx.Entry(ref); return err }); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Status != StatusReplayed {
		t.Fatalf("stored %+v, want status %s", got, StatusReplayed)
	}
	assertCountersEqualRecount(t, p, base, base.Add(48*time.Hour))
}

// regexpWrites matches the statements that write a row of the ledger, an
// entry, an audit record or a counter.
var regexpWrites = regexp.MustCompile(`^(with w0 as \(|update ledger|update entries|insert into audit|insert into entry_counts)`)
