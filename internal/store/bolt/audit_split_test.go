package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Issue 33: an audit record prepared through the store (PrepareAudit)
// has its stored form compressed before the write lock, split after the
// seq, time and chain links only known inside. The chain must be the
// same bytes as without: two stores, one appending prepared records and
// one appending the same records unprepared, hold the same sealed
// records, hash for hash, and both verify.
func TestPreparedAuditStoresTheSameChain(t *testing.T) {
	now := time.Date(2026, 11, 27, 16, 0, 0, 123456789, time.UTC)
	open := func(name string) *Bolt {
		s, err := Open(filepath.Join(t.TempDir(), name), store.Options{Now: func() time.Time { return now }, AuditKey: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	prepared, plain := open("prepared.db"), open("plain.db")
	snap := triage.NewSnapshot(triage.SourceFile{Name: "rules.yaml", Text: "rules: []\n"}, nil)
	for _, s := range []*Bolt{prepared, plain} {
		if err := s.PutSnapshot(context.Background(), snap.ID, snap); err != nil {
			t.Fatal(err)
		}
	}
	in := &entry.Entry{ID: "e1", Source: "jsonl", Topic: "orders", Message: "upstream <unavailable> & more", IdempotencyKey: "k1"}
	records := func() []audit.Record {
		return []audit.Record{
			{Actor: "bench", Kind: audit.KindDecision, EntryRef: "jsonl:e1", EntryID: "e1", Source: "jsonl", Key: "k1",
				Decision: &triage.Decision{Class: "transient", ProposedAction: triage.AutoReplay}, Input: in, Action: triage.AutoReplay,
				Reason: "transient failure, budget left"},
			{Actor: "bench", Kind: audit.KindDispatch, EntryRef: "jsonl:e1", Key: "k1", LedgerBefore: "decided", LedgerAfter: "dispatching",
				Reason: "attempt 1 of 3 to sink"},
			// The store holds this snapshot: Append inserts snapshot_kept
			// into the prepared body, which then does not end as prepared.
			{Actor: "bench", Kind: audit.KindDecision, EntryRef: "jsonl:e2", PolicySnapshot: snap.ID, Reason: "kept snapshot"},
			{Actor: "bench", Kind: audit.KindOutcome, EntryRef: "jsonl:e1", Key: "k1", Outcome: "succeeded", LedgerBefore: "dispatching",
				LedgerAfter: "succeeded", Detail: json.RawMessage(`{"attempt":1,"status":200,"target":"sink"}`)},
			{Actor: "x", Kind: audit.KindBulk}, // too small to compress
		}
	}
	for i, rec := range records() {
		prepared.PrepareAudit(&rec)
		if err := prepared.Update(context.Background(), func(tx store.Tx) error {
			cp := rec // as the runner does: a copy per try
			_, err := tx.Append(&cp)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		unprepared := records()[i]
		if err := plain.Update(context.Background(), func(tx store.Tx) error {
			_, err := tx.Append(&unprepared)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(s *Bolt) (out []audit.Sealed) {
		if err := s.AuditRange(context.Background(), 1, func(_ uint64, rec audit.Sealed, derr error) error {
			if derr != nil {
				t.Fatal(derr)
			}
			out = append(out, rec)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got, want := read(prepared), read(plain)
	if len(got) != len(want) || len(got) != len(records()) {
		t.Fatalf("%d records prepared, %d plain", len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].Prev != want[i].Prev || got[i].Hash != want[i].Hash || !bytes.Equal(got[i].Body, want[i].Body) {
			t.Fatalf("record %d:\nprepared %+v\n   plain %+v", i+1, got[i], want[i])
		}
	}
	// The dispatch, decision and outcome records were stored split; the
	// one whose body changed inside (snapshot_kept) and the small one
	// were not.
	split := map[uint64]bool{}
	if err := prepared.db.View(func(tx *bolt.Tx) error {
		for seq := uint64(1); seq <= uint64(len(got)); seq++ {
			v := tx.Bucket(bucketAudit).Get(seqKey(seq))
			split[seq] = bytes.HasPrefix(v, s2Magic) && v[len(s2Magic)] == 0x81
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !split[1] || !split[2] || split[3] || !split[4] || split[5] {
		t.Fatalf("stored split: %v, want 1, 2 and 4", split)
	}
	for _, s := range []*Bolt{prepared, plain} {
		res, err := audit.Verify(context.Background(), s, []byte("k"))
		if err != nil || !res.OK() || res.Records != len(got) {
			t.Fatalf("verify %s: %+v, %v", s.Path(), res, err)
		}
	}
}
