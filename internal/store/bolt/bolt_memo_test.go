package bolt

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
)

// writeMemo gives back only what the file holds: a ledger record read
// through it equals the record decoded from the file (times included),
// and a remembered write the file does not hold (a transaction that did
// not commit) is never returned.
func TestWriteMemoGivesOnlyWhatTheFileHolds(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 24, 4, 30, 0, 123456789, time.UTC)
	s, err := Open(filepath.Join(t.TempDir(), "replayctl.db"), store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const key = "order-1:email"
	if err := s.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Transition(idempotency.Transition{Key: key, To: idempotency.Decided, EntryRef: "jsonl:e1", PayloadHash: "sha256:x"}); err != nil {
			return err
		}
		_, err := tx.Transition(idempotency.Transition{Key: key, From: idempotency.Decided, To: idempotency.Dispatching, Owner: "me"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	read := func() *idempotency.Record {
		var rec *idempotency.Record
		if err := s.UpdateNow(ctx, func(tx store.Tx) error {
			var err error
			rec, err = tx.Ledger(key)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	var decoded *idempotency.Record
	if err := s.View(ctx, func(tx store.Tx) error { // a read transaction never uses the memo
		var err error
		decoded, err = tx.Ledger(key)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.memo.ledger[key]; !ok {
		t.Fatal("the write was not remembered")
	}
	if got := read(); !reflect.DeepEqual(got, decoded) {
		t.Errorf("through the memo %+v, decoded %+v", got, decoded)
	}
	// A write remembered but not in the file.
	bogus := *decoded
	bogus.State = idempotency.Succeeded
	s.memo.putLedger(key, []byte("bytes the file does not hold"), &bogus)
	if got := read(); !reflect.DeepEqual(got, decoded) {
		t.Errorf("a remembered write the file does not hold was returned: %+v", got)
	}
}
