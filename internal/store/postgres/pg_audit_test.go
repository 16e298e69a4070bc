package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

func openPG(t *testing.T, dsn string, o store.Options) *Postgres {
	t.Helper()
	p, err := Open(context.Background(), dsn, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func appendRef(ctx context.Context, s store.Backend, ref string) (uint64, error) {
	var seq uint64
	err := s.Update(ctx, func(tx store.Tx) error {
		sealed, err := tx.Append(&audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: ref, Action: "auto_replay"})
		seq = sealed.Seq
		return err
	})
	return seq, err
}

// Issue 16: every writer took the audit head row FOR UPDATE, so workers
// queued on one row. A writer now appends while another writer's
// transaction, holding an earlier record, is still open; the later record
// stays in the unsealed tail (reported, not verified) until the earlier
// one commits, then both are sealed into one chain.
func TestPostgresWritersDoNotWaitOnTheAuditHead(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	p.settleWait = 20 * time.Millisecond
	holding, release := make(chan uint64), make(chan struct{})
	firstErr := make(chan error, 1)
	go func() {
		firstErr <- p.Update(ctx, func(tx store.Tx) error {
			sealed, err := tx.Append(&audit.Record{Actor: "slow", Kind: audit.KindDecision, EntryRef: "jsonl:slow"})
			if err != nil {
				return err
			}
			holding <- sealed.Seq
			<-release
			return nil
		})
	}()
	first := <-holding
	// With the head row lock this write waited for the open transaction.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	second, err := appendRef(wctx, p, "jsonl:fast")
	if err != nil {
		close(release)
		t.Fatalf("a writer waited on another's open transaction: %v", err)
	}
	if second != first+1 {
		t.Fatalf("numbers %d then %d", first, second)
	}
	res, err := audit.Verify(ctx, p, nil)
	if err != nil || !res.OK() {
		t.Fatalf("verify with an open writer: %+v %v", res, err)
	}
	if res.Records != 0 || res.Unsealed != 1 || !strings.Contains(strings.Join(res.Unchecked, "\n"), "unsealed tail: 1 record") {
		t.Fatalf("the record after the open one must be the unsealed tail: %+v", res)
	}
	close(release)
	if err := <-firstErr; err != nil {
		t.Fatal(err)
	}
	res, err = audit.Verify(ctx, p, nil)
	if err != nil || !res.OK() || res.Records != 2 || res.Unsealed != 0 {
		t.Fatalf("after the open writer committed: %+v %v", res, err)
	}
}

// Records taken by transactions that roll back leave gaps in the numbers;
// the sealer fills each with a void record, so that many writers, some of
// them failing, still make one dense verifiable chain in which every
// committed record keeps the number its writer was given.
func TestPostgresSealerChainsConcurrentWritersAndVoidsRollbacks(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	boom := errors.New("boom")
	var mu sync.Mutex
	got := map[uint64]string{}
	var rolledBack []uint64
	var wg sync.WaitGroup
	for w := range 4 {
		// Each worker has its own store, as separate processes do.
		p := openPG(t, dsn, store.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				ref := fmt.Sprintf("jsonl:w%d-%d", w, i)
				var seq uint64
				err := p.Update(ctx, func(tx store.Tx) error {
					sealed, err := tx.Append(&audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: ref})
					seq = sealed.Seq
					if err == nil && i%5 == 4 {
						return boom
					}
					return err
				})
				mu.Lock()
				switch {
				case errors.Is(err, boom):
					rolledBack = append(rolledBack, seq)
				case err != nil:
					t.Error(err)
				default:
					got[seq] = ref
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	p := openPG(t, dsn, store.Options{})
	res, err := audit.Verify(ctx, p, nil)
	if err != nil || !res.OK() || res.Unsealed != 0 {
		t.Fatalf("verify: %+v %v", res, err)
	}
	// A rolled-back number after the last committed one is no gap yet.
	last, gaps := uint64(0), 0
	for seq := range got {
		last = max(last, seq)
	}
	for _, seq := range rolledBack {
		if seq < last {
			gaps++
		}
	}
	if len(rolledBack) != 12 || res.Records != int(last) || res.Records != len(got)+gaps {
		t.Fatalf("%d records for %d committed (last %d) and %d rolled back (%d before it)", res.Records, len(got), last, len(rolledBack), gaps)
	}
	voids := 0
	if err := audit.Each(ctx, p, audit.Query{}, func(r audit.Record) error {
		if r.Kind == KindVoid {
			voids++
		} else if got[r.Seq] != r.EntryRef {
			t.Errorf("record %d is %q, its writer was given it for %q", r.Seq, r.EntryRef, got[r.Seq])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if voids != gaps {
		t.Fatalf("%d void records for %d rollbacks", voids, gaps)
	}
}

// Tampering with sealed records is caught as in bbolt, including making a
// sealed record look unsealed (clearing its links).
func TestPostgresAuditVerifyFindsTampering(t *testing.T) {
	cases := []struct {
		name, sql string
		wantSeq   uint64
	}{
		{"change", `UPDATE audit SET body = convert_to(replace(convert_from(body, 'UTF8'), 'auto_replay', 'quarantine'), 'UTF8') WHERE seq = 3`, 3},
		{"unlink", `UPDATE audit SET prev = NULL, hash = NULL WHERE seq = 2`, 2},
		{"delete", `DELETE FROM audit WHERE seq = 2`, 3},
		{"truncate tail", `DELETE FROM audit WHERE seq = 5`, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			p := openPG(t, testsvc.Postgres(t), store.Options{})
			for i := range 5 {
				if _, err := appendRef(ctx, p, fmt.Sprintf("jsonl:e%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			if res, err := audit.Verify(ctx, p, nil); err != nil || !res.OK() || res.Records != 5 {
				t.Fatalf("intact chain: %+v %v", res, err)
			}
			if _, err := p.pool.Exec(ctx, c.sql); err != nil {
				t.Fatal(err)
			}
			res, err := audit.Verify(ctx, p, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK() || res.Break.Seq != c.wantSeq {
				t.Fatalf("tampering not caught at %d: %+v", c.wantSeq, res)
			}
			// Issue 29: export fails at the same break.
			var out bytes.Buffer
			var brk *audit.Break
			if err := audit.Export(ctx, p, &out, nil); !errors.As(err, &brk) || brk.Seq != c.wantSeq ||
				!strings.Contains(out.String(), fmt.Sprintf(`{"error":{"seq":%d,`, c.wantSeq)) {
				t.Fatalf("export of the tampered chain: %v\n%s", err, out.String())
			}
		})
	}
}

// With a key, the sealer signs each head it seals.
func TestPostgresSealedHeadIsSigned(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{AuditKey: []byte("k1")})
	for i := range 3 {
		if _, err := appendRef(ctx, p, fmt.Sprintf("jsonl:e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := audit.Verify(ctx, p, []byte("k1")); err != nil || !res.OK() || !res.Signed || res.Records != 3 {
		t.Fatalf("signed chain: %+v %v", res, err)
	}
	if res, err := audit.Verify(ctx, p, []byte("other")); err != nil || res.OK() {
		t.Fatalf("wrong key accepted: %+v %v", res, err)
	}
}

// Without the audit head lock, two writers deciding entries with one
// idempotency key are no longer ordered: the second's insert of the key
// found the first's and failed with a conflict, and its entry was lost
// from the run (a bench of 2,000 entries replayed 1,999). The transaction
// is now run again and sees the key as the first left it. Since issue 33
// the insert goes with the transaction's next round trip (here COMMIT),
// so the writer that commits first creates the key, whichever inserted
// first in its transaction: the held writer's COMMIT then fails on the
// key, and it runs again and sees the other's record.
func TestPostgresSecondWriterOfANewKeySeesTheFirst(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	decide := func(saw *bool, hold chan struct{}, inserted chan struct{}) error {
		return p.Update(ctx, func(tx store.Tx) error {
			cur, err := tx.Ledger("k")
			if err != nil {
				return err
			}
			if cur != nil {
				*saw = true
				return nil
			}
			if _, err := tx.Transition(idempotency.Transition{Key: "k", To: idempotency.Decided, EntryRef: "jsonl:a"}); err != nil {
				return err
			}
			if inserted != nil {
				close(inserted)
				<-hold
			}
			return nil
		})
	}
	hold, inserted := make(chan struct{}), make(chan struct{})
	var firstSaw, secondSaw bool
	first := make(chan error, 1)
	go func() { first <- decide(&firstSaw, hold, inserted) }()
	<-inserted
	second := make(chan error, 1)
	go func() { second <- decide(&secondSaw, nil, nil) }()
	// Let the first commit once the second waits on its row (an insert
	// sent before the hold) or has committed (an insert sent with COMMIT).
	var secondErr error
	secondDone := false
	deadline := time.Now().Add(30 * time.Second)
	for waiting := false; !waiting && !secondDone; {
		select {
		case secondErr = <-second:
			secondDone = true
			continue
		default:
		}
		if time.Now().After(deadline) {
			close(hold)
			t.Fatal("the second writer neither waited on the first nor committed")
		}
		if err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if !secondDone {
		secondErr = <-second
	}
	if secondErr != nil {
		t.Fatalf("second writer of the key: %v", secondErr)
	}
	// One created the key; the other saw its record (none was lost).
	if firstSaw == secondSaw {
		t.Fatalf("first writer saw the other's record: %v, second: %v; want exactly one", firstSaw, secondSaw)
	}
	var n int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM ledger WHERE key = 'k'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d ledger rows for the key (%v)", n, err)
	}
}

// A writer can hold a record number with a transaction id above every
// completed one; a snapshot does not list such a transaction as running.
// The sealer once took the gap it left for a rollback and voided the
// number, and the writer's record then failed as a duplicate (its entry
// quarantined). Here V takes its id first, W then takes a number and
// waits, V takes the next number and commits: the gap is W's, still live.
func TestPostgresSealerNeverVoidsALiveRecord(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	p.settleWait = 50 * time.Millisecond
	vHasID, wHasNumber, wRelease := make(chan struct{}), make(chan struct{}), make(chan struct{})
	vDone, wDone := make(chan error, 1), make(chan error, 1)
	go func() {
		vDone <- p.Update(ctx, func(tx store.Tx) error {
			if _, err := tx.Transition(idempotency.Transition{Key: "v", To: idempotency.Decided}); err != nil {
				return err
			}
			close(vHasID)
			<-wHasNumber
			_, err := tx.Append(&audit.Record{Actor: "v", Kind: audit.KindDecision, EntryRef: "jsonl:v"})
			return err
		})
	}()
	<-vHasID
	go func() {
		wDone <- p.Update(ctx, func(tx store.Tx) error {
			if _, err := tx.Append(&audit.Record{Actor: "w", Kind: audit.KindDecision, EntryRef: "jsonl:w"}); err != nil {
				return err
			}
			close(wHasNumber)
			<-wRelease
			return nil
		})
	}()
	if err := <-vDone; err != nil {
		t.Fatal(err)
	}
	sealed := make(chan error, 1)
	go func() { _, err := p.SealAudit(ctx, true); sealed <- err }()
	select {
	case err := <-sealed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		close(wRelease)
		t.Fatal("the sealer blocked on the live writer's record: it took its number for a rollback")
	}
	close(wRelease)
	if err := <-wDone; err != nil {
		t.Fatalf("the live writer's record: %v", err)
	}
	res, err := audit.Verify(ctx, p, nil)
	if err != nil || !res.OK() || res.Records != 2 {
		t.Fatalf("verify: %+v %v", res, err)
	}
	if err := audit.Each(ctx, p, audit.Query{}, func(r audit.Record) error {
		if r.Kind == KindVoid {
			t.Errorf("record %d voided", r.Seq)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A transaction's records, what they add to the audit counters and what
// its entry writes add to the entry counters go in one statement, sent
// with COMMIT (three to five statements of a replay's two transactions
// before). What is stored is what it was: the bodies Append returned,
// chained by the sealer, the counters equal to a recount.
func TestPostgresTransactionInsertsItsRecordsAndCountersInOneStatement(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	if _, err := p.Ingest(ctx, []*store.EntryRecord{mixedEntry(0, base), mixedEntry(1, base)}); err != nil {
		t.Fatal(err)
	}
	ref := mixedEntry(1, base).Entry.Ref()
	replay := &triage.Decision{ProposedAction: triage.AutoReplay}
	before := p.Trips()
	var sealed []audit.Sealed
	if err := p.Update(ctx, func(tx store.Tx) error {
		sealed = nil
		for _, r := range []audit.Record{
			{Kind: audit.KindDecision, Decision: replay, Action: triage.AutoReplay},
			{Kind: audit.KindDispatch, Action: triage.AutoReplay},
			{Kind: audit.KindOutcome, Outcome: "succeeded"},
		} {
			r.Actor, r.EntryRef = "ops", ref
			s, err := tx.Append(&r)
			if err != nil {
				return err
			}
			sealed = append(sealed, s)
		}
		r, err := tx.Entry(ref)
		if err != nil || r == nil {
			return fmt.Errorf("read %s: %v", ref, err)
		}
		r.Status, r.LastDecision = store.StatusReplayed, sealed[0].Seq
		return tx.PutEntry(r)
	}); err != nil {
		t.Fatal(err)
	}
	after := p.Trips()
	writes := 0
	for sql, n := range after.ByStatement {
		if n == before.ByStatement[sql] {
			continue
		}
		touches := 0
		for _, table := range []string{"insert into audit (", "insert into audit_counts", "insert into entry_counts"} {
			if strings.Contains(sql, table) {
				touches++
			}
		}
		if touches > 0 {
			writes += int(n - before.ByStatement[sql])
			if touches != 3 {
				t.Errorf("records and counters written apart: %s", sql)
			}
		}
	}
	if writes != 1 {
		t.Errorf("%d statements wrote the records and counters, want 1", writes)
	}

	if _, err := p.SealAudit(ctx, true); err != nil {
		t.Fatal(err)
	}
	res, err := audit.Verify(ctx, p, nil)
	if err != nil || !res.OK() || res.Records != 3 {
		t.Fatalf("verify: %+v, %v", res, err)
	}
	i := 0
	if err := p.AuditRange(ctx, 1, func(seq uint64, s audit.Sealed, err error) error {
		if err != nil {
			return err
		}
		if i >= len(sealed) || seq != sealed[i].Seq || !bytes.Equal(s.Body, sealed[i].Body) {
			t.Errorf("record %d stored as %s, Append returned %+v", seq, s.Body, sealed)
		}
		i++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want, _ := recount(t, p, base, base)
	if got, err := p.Counters(ctx); err != nil || got.Decisions != want.Decisions || got.Decisions != 1 ||
		got.Denied != want.Denied || !reflect.DeepEqual(got.Outcomes, want.Outcomes) {
		t.Errorf("counters %+v (%v); recount %+v", got, err, want)
	}
	assertCountersEqualRecount(t, p, base, base.Add(48*time.Hour))
}
