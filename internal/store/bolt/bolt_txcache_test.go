package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// A replay step reads an entry and writes it back in one transaction
// (reconcile.go's intent and outcome). PutEntry must reuse what Entry
// decoded (issue 16: the old record was decoded again to move its index
// keys) and still leave exactly the indexes, counters, records and
// payloads that the decode-again path leaves: store a goes through
// Entry -> PutEntry twice in one transaction (the cached path, with the
// payload edited in place), store b puts the same final record with no
// Entry first (the path that decodes the old record).
func TestPutEntryReusesTheRecordEntryDecoded(t *testing.T) {
	ctx := context.Background()
	clock := func() time.Time { return time.Date(2026, 11, 23, 21, 0, 0, 0, time.UTC) }
	open := func(name string) (*Bolt, *int) {
		s, err := Open(filepath.Join(t.TempDir(), name), store.Options{Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		decodes := new(int)
		s.onEntryDecode = func() { *decodes++ }
		return s, decodes
	}
	first := func(i int) *store.EntryRecord {
		return &store.EntryRecord{
			Entry: entry.Entry{ID: fmt.Sprintf("e%d", i), Source: "jsonl", Topic: "orders.t1", ReasonCode: "TIMEOUT",
				Message: "upstream timed out after 30s", Payload: []byte(fmt.Sprintf(`{"order":%d,"note":"%s"}`, i, bytes.Repeat([]byte("x"), 200)))},
			Class: triage.Transient, Action: triage.AutoReplay, Status: store.StatusPending, FirstSeen: clock().Add(-time.Hour),
		}
	}
	seed := func(s *Bolt) {
		for i := range 3 {
			if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutEntry(first(i)) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	final := func(i int) *store.EntryRecord {
		r := first(i)
		r.Status = store.StatusReplayed
		r.Probe = "absent"
		r.Entry.Payload[0] = '['
		return r
	}

	a, aDecodes := open("a.db")
	seed(a)
	*aDecodes = 0
	if err := a.UpdateNow(ctx, func(tx store.Tx) error {
		for i := range 3 {
			ref := first(i).Entry.Ref()
			er, err := tx.Entry(ref)
			if err != nil {
				return err
			}
			er.Status = store.StatusReplaying
			if err := tx.PutEntry(er); err != nil {
				return err
			}
			if er, err = tx.Entry(ref); err != nil {
				return err
			}
			before := *aDecodes
			er.Status, er.Probe = store.StatusReplayed, "absent"
			er.Entry.Payload[0] = '[' // in place: must still be written
			if err := tx.PutEntry(er); err != nil {
				return err
			}
			if *aDecodes != before {
				t.Errorf("%s: PutEntry decoded the old record again (%d decodes)", ref, *aDecodes-before)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if *aDecodes != 6 {
		t.Errorf("decodes = %d, want 6 (one per Entry, none per PutEntry)", *aDecodes)
	}

	putFinal := func(s *Bolt) {
		if err := s.UpdateNow(ctx, func(tx store.Tx) error {
			for i := range 3 {
				if err := tx.PutEntry(final(i)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	b, bDecodes := open("b.db")
	seed(b)
	// Another process's file: nothing this one wrote (writeMemo) is known.
	b.memo.ledger, b.memo.facets = nil, nil
	*bDecodes = 0
	putFinal(b)
	if *bDecodes != 3 {
		t.Errorf("without Entry first, decodes = %d, want 3 (PutEntry reads the old record)", *bDecodes)
	}
	// c wrote the records itself: their facets come from its writeMemo.
	c, cDecodes := open("c.db")
	seed(c)
	*cDecodes = 0
	putFinal(c)
	if *cDecodes != 0 {
		t.Errorf("records this process wrote: decodes = %d, want 0 (writeMemo knows their facets)", *cDecodes)
	}

	for _, name := range [][]byte{bucketIdx, bucketCounters, bucketSigMeta, bucketEntries, bucketPayloadsZ} {
		want := dumpBucket(t, b, name)
		if got := dumpBucket(t, a, name); got != want {
			t.Errorf("bucket %s differs from the decode-again path:\n got %s\nwant %s", name, got, want)
		}
		if got := dumpBucket(t, c, name); got != want {
			t.Errorf("bucket %s, facets from writeMemo, differs from the decode-again path:\n got %s\nwant %s", name, got, want)
		}
	}
	if err := a.View(ctx, func(tx store.Tx) error {
		er, err := tx.Entry(first(0).Entry.Ref())
		if err != nil {
			return err
		}
		if er.Entry.Payload[0] != '[' {
			t.Errorf("the payload edited in place was not written: %q", er.Entry.Payload[:10])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// dumpBucket is a bucket's keys and values, as stored, in key order.
func dumpBucket(t *testing.T, s *Bolt, name []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(name).ForEach(func(k, v []byte) error {
			fmt.Fprintf(&buf, "%q=%x\n", k, v)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// A write transaction keeps the ledger records it moves and the audit
// head in memory and writes them once when fn returns (an intent moves a
// key twice and a window appends several records). What is stored must
// not change: concurrent Updates that bbolt's Batch runs in one
// transaction (each with its own boltTx) still chain their records, the
// signed head matches the last record, a key moved twice holds its last
// state, and a failing fn leaves neither its ledger moves nor its head.
func TestWriteTransactionsWriteLedgerAndHeadOnce(t *testing.T) {
	ctx := context.Background()
	key := []byte("k1")
	path := filepath.Join(t.TempDir(), "replayctl.db")
	s, err := Open(path, store.Options{AuditKey: key, MaxBatchSize: 4, MaxBatchDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	step := func(k string, fail bool) error {
		return s.Update(ctx, func(tx store.Tx) error {
			if _, err := tx.Transition(idempotency.Transition{Key: k, To: idempotency.Decided, EntryRef: "jsonl:" + k, PayloadHash: "sha256:1"}); err != nil {
				return err
			}
			if cur, err := tx.Ledger(k); err != nil || cur == nil || cur.State != idempotency.Decided {
				return fmt.Errorf("ledger read back in the transaction: %+v, %v", cur, err)
			}
			for _, kind := range []string{audit.KindDecision, audit.KindDispatch} {
				if _, err := tx.Append(&audit.Record{Actor: "t", Kind: kind, EntryRef: "jsonl:" + k, Key: k}); err != nil {
					return err
				}
			}
			if _, err := tx.Transition(idempotency.Transition{Key: k, From: idempotency.Decided, To: idempotency.Dispatching, PayloadHash: "sha256:1"}); err != nil {
				return err
			}
			if fail {
				return errors.New("refused")
			}
			return nil
		})
	}
	errs := make(chan error, 4)
	for i := range 4 {
		go func() { errs <- step(fmt.Sprintf("k%d", i), i == 2) }()
	}
	failed := 0
	for range 4 {
		if err := <-errs; err != nil {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d Updates failed, want the one that refused", failed)
	}
	if err := s.View(ctx, func(tx store.Tx) error {
		for i := range 4 {
			rec, err := tx.Ledger(fmt.Sprintf("k%d", i))
			if err != nil {
				return err
			}
			switch {
			case i == 2 && rec != nil:
				t.Errorf("k2's transaction failed but its ledger record is %+v", rec)
			case i != 2 && (rec == nil || rec.State != idempotency.Dispatching):
				t.Errorf("k%d: ledger record %+v, want dispatching", i, rec)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	seq, hash, err := s.AuditHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mac, err := s.AuditHeadMAC(ctx); err != nil || mac != audit.HeadMAC(key, seq, hash) {
		t.Errorf("head MAC %q (%v) does not sign head %d %s", mac, err, seq, hash)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if res := verifyFile(t, path, key); !res.OK() || !res.Signed || res.Records != 6 || seq != 6 {
		t.Fatalf("chain after 3 committed transactions of 2 records: %+v (head %d)", res, seq)
	}
}

// Append writes a sealed record's JSON directly instead of through
// json.Marshal (which re-compacts the body); the bytes stored must be
// exactly json.Marshal's, or the stored records would change. Bodies with
// HTML characters, U+2028, non-ASCII text and nested raw JSON included, and
// a hash that needs escaping (never from Seal) takes the general path.
func TestEncodeSealedIsJSONMarshal(t *testing.T) {
	recs := []*audit.Record{
		{Seq: 1, Actor: "a", Kind: audit.KindDecision, EntryRef: "jsonl:x", Reason: "plain"},
		{Seq: 1 << 40, Actor: "<b>&amp;</b>", Kind: audit.KindOutcome, EntryRef: "jsonl:\u2028ü\"\\", Reason: strings.Repeat("long reason ", 30)},
		{Seq: 7, Actor: "a", Kind: audit.KindDecision, Input: &entry.Entry{ID: "i", Payload: []byte(`{ "spaced" : [1, 2] , "h":"<&>" }`)}},
	}
	for i, r := range recs {
		for _, prev := range []string{audit.Genesis, `sha256:"quoted"<`} {
			sealed, err := audit.Seal(r, prev)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(&sealed)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := encodeSealed(&sealed)
			if err != nil {
				t.Fatal(err)
			}
			got, err := store.RecordJSON(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("record %d (prev %q):\n got %s\nwant %s", i, prev, got, want)
			}
			if viaRecord, _ := store.EncodeHotRecord(&sealed); !bytes.Equal(raw, viaRecord) {
				t.Errorf("record %d: stored bytes differ from encodeHotRecord's", i)
			}
		}
	}
}

// A window's transaction (many audit records, several kinds and hours) and
// a concurrent batch with a failing member leave the decision counters
// exactly as counting record by record does: the file's counters equal
// those an index rebuild (countAudit per record) makes from the same chain,
// and the failing member counts nothing. (The transaction's counts are
// now added up and written once each, at flush: see counts.)
func TestDecisionCountersOfWindowsAndBatches(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "replayctl.db")
	now := time.Date(2026, 11, 2, 8, 59, 0, 0, time.UTC)
	s, err := Open(path, store.Options{Now: func() time.Time { return now }, MaxBatchSize: 3, MaxBatchDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	appendWindow := func(tx store.Tx, prefix string, n int) error {
		for i := range n {
			ref := fmt.Sprintf("jsonl:%s%d", prefix, i)
			recs := []*audit.Record{
				{Kind: audit.KindDecision, EntryRef: ref, Decision: &triage.Decision{ProposedAction: triage.AutoReplay}, Action: triage.AutoReplay},
				{Kind: audit.KindDispatch, EntryRef: ref},
				{Kind: audit.KindOutcome, EntryRef: ref, Outcome: []string{"succeeded", "failed"}[i%2]},
			}
			if i%4 == 3 { // a denied replay, in the next hour
				recs = []*audit.Record{{Kind: audit.KindDecision, EntryRef: ref, Time: now.Add(time.Hour),
					Decision: &triage.Decision{ProposedAction: triage.AutoReplay}, Action: triage.RequireApproval}}
			}
			for _, r := range recs {
				if _, err := tx.Append(r); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := s.UpdateNow(ctx, func(tx store.Tx) error { return appendWindow(tx, "w", 16) }); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			errs <- s.Update(ctx, func(tx store.Tx) error {
				if err := appendWindow(tx, fmt.Sprintf("b%d-", i), 5); err != nil {
					return err
				}
				if i == 1 {
					return errors.New("refused")
				}
				return nil
			})
		}()
	}
	failed := 0
	for range 3 {
		if err := <-errs; err != nil {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d Updates failed, want the one that refused", failed)
	}
	got, err := s.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 16 + 2*5 entries: a decision each; every fourth denied, the rest
	// replayed, even ones succeeded (8 + 2*3), odd ones failed (4 + 2*1).
	if got.Decisions != 26 || got.Denied != 6 || got.Outcomes["succeeded"] != 14 || got.Outcomes["failed"] != 6 {
		t.Errorf("counters %+v, want 26 decisions, 6 denied, 14 succeeded, 6 failed", got)
	}
	written := counterBucket(t, s)
	s.Close()

	// Rebuild the indexes and counters from the chain, record by record.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyIndexVer) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err = Open(path, store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rebuilt := counterBucket(t, s); !reflect.DeepEqual(written, rebuilt) {
		t.Errorf("counters as written:\n%v\nas rebuilt record by record:\n%v", written, rebuilt)
	}
}

func counterBucket(t *testing.T, s *Bolt) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCounters).ForEach(func(k, v []byte) error {
			out[string(k)] = readCount(v)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
