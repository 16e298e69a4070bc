package bolt

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/group"
	"github.com/replayctl/replayctl/internal/store"
)

func copySample() *store.EntryRecord {
	at := time.Date(2026, 11, 27, 11, 0, 0, 123456789, time.UTC)
	return &store.EntryRecord{Entry: entry.Entry{ID: "e1", Source: "jsonl", Topic: "orders", IdempotencyKey: "order-1:email",
		Attempts: 3, Labels: map[string]string{"tenant": "acme"}, Ancestors: []string{"e0"}, LastFailure: at,
		History: []entry.Failure{{Attempt: 1, Time: at, Message: "503"}}, Payload: json.RawMessage(`{"to":"a@b.c"}`)},
		Status: store.StatusReplaying, Class: "transient", Action: "auto_replay", Reason: "5xx", FirstSeen: at, LastSeen: at,
		Group: &group.Key{Source: "jsonl", Topic: "orders", Class: "transient", Error: "503"}}
}

// TestCloneUnpaidCopiesEveryReference holds cloneUnpaid to EntryRecord: a
// map, slice or pointer added to the record and not copied there would
// let a caller's change to one read show in the next.
func TestCloneUnpaidCopiesEveryReference(t *testing.T) {
	want := []string{"Entry.Ancestors", "Entry.Labels", "Entry.Payload", "Entry.History", "Group"}
	var got []string
	var walk func(reflect.Type, string)
	walk = func(rt reflect.Type, at string) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			name := at + f.Name
			switch f.Type.Kind() {
			case reflect.Map, reflect.Slice, reflect.Pointer, reflect.Interface, reflect.Chan, reflect.Func:
				got = append(got, name)
				if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct {
					walk(f.Type.Elem(), name+"[].")
				}
				if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
					walk(f.Type.Elem(), name+".")
				}
			case reflect.Struct:
				if f.Type != reflect.TypeFor[time.Time]() {
					walk(f.Type, name+".")
				}
			}
		}
	}
	walk(reflect.TypeFor[store.EntryRecord](), "")
	if !slices.Equal(got, want) {
		t.Fatalf("EntryRecord's references are %v; cloneUnpaid copies %v: copy the new one there", got, want)
	}
}

// TestEntryTwiceInATxDecodesOnce reads an entry twice in one read-write
// transaction (a guarded write checks it, then records it): the second
// read decodes nothing and gives a record of its own, equal to the
// stored one whatever the caller did to the first; after a PutEntry the
// next read gives the record put.
func TestEntryTwiceInATxDecodesOnce(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "replayctl.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stored := copySample()
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutEntry(stored) }); err != nil {
		t.Fatal(err)
	}
	decodes := 0
	s.onEntryDecode = func() { decodes++ }
	ref := stored.Entry.Ref()
	if err := s.UpdateNow(ctx, func(tx store.Tx) error {
		first, err := tx.Entry(ref)
		if err != nil {
			return err
		}
		first.Entry.Labels["tenant"] = "changed by the caller"
		first.Entry.Payload[0] = 'X'
		first.Entry.History[0].Message = "changed"
		second, err := tx.Entry(ref)
		if err != nil {
			return err
		}
		if decodes != 1 {
			t.Errorf("%d decodes for two reads in one transaction, want 1", decodes)
		}
		if !reflect.DeepEqual(second, stored) {
			t.Errorf("second read\n%+v\nnot the stored record\n%+v", second, stored)
		}
		second.Status = store.StatusFailed
		if err := tx.PutEntry(second); err != nil {
			return err
		}
		third, err := tx.Entry(ref)
		if err != nil {
			return err
		}
		if third.Status != store.StatusFailed || !reflect.DeepEqual(third.Entry.Payload, stored.Entry.Payload) {
			t.Errorf("after PutEntry read status %q payload %s", third.Status, third.Entry.Payload)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// dumpEntryBuckets is every key and value of the buckets a PutEntry writes.
func dumpEntryBuckets(t *testing.T, s *Bolt) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.db.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketEntries, bucketPayloads, bucketPayloadsZ, bucketIdx, bucketCounters, bucketSigMeta} {
			if b := tx.Bucket(name); b != nil {
				if err := b.ForEach(func(k, v []byte) error { out[string(name)+"/"+string(k)] = string(v); return nil }); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPutPreparedWritesWhatPutEntryWrites moves an entry from replaying
// to pending (a retry, its due time set, its facets changed) through
// PutEntry in one file and through PrepareEntry and PutPrepared in
// another: the files hold the same bytes, index keys and counters, and
// the prepared write decodes nothing.
func TestPutPreparedWritesWhatPutEntryWrites(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	open := func() *Bolt { return openAt(t, now) }
	plain, prepared := open(), open()
	first := copySample()
	second := copySample()
	second.Status, second.Reason, second.NextAttemptAt = store.StatusPending, "retry at 12:05", now.Add(5*time.Minute)
	for _, s := range []*Bolt{plain, prepared} {
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutEntry(first) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := plain.Update(ctx, func(tx store.Tx) error { return tx.PutEntry(second) }); err != nil {
		t.Fatal(err)
	}
	p := prepared.PrepareEntry(first, second)
	if p == nil {
		t.Fatal("PrepareEntry refused a record that encodes")
	}
	decodes := 0
	prepared.onEntryDecode = func() { decodes++ }
	if err := prepared.Update(ctx, func(tx store.Tx) error {
		put, err := tx.PutPrepared(p)
		if err == nil && !put {
			t.Error("PutPrepared did not write over the record it was prepared from")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if decodes != 0 {
		t.Errorf("the prepared write decoded %d records, want 0", decodes)
	}
	if a, b := dumpEntryBuckets(t, plain), dumpEntryBuckets(t, prepared); !reflect.DeepEqual(a, b) {
		t.Fatalf("PutEntry wrote\n%q\nPutPrepared wrote\n%q", a, b)
	}
}

// TestPutPreparedRefusesAnotherRecord changes the stored record after
// the write was prepared (a person's hold, in another transaction and
// earlier in the same one): PutPrepared writes nothing and says so, and
// the change stands.
func TestPutPreparedRefusesAnotherRecord(t *testing.T) {
	ctx := context.Background()
	for _, sameTx := range []bool{false, true} {
		s, err := Open(filepath.Join(t.TempDir(), "replayctl.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		first := copySample()
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutEntry(first) }); err != nil {
			t.Fatal(err)
		}
		next := *first
		next.Status = store.StatusReplayed
		p := s.PrepareEntry(first, &next)
		held := copySample()
		held.Hold = store.HoldResolved
		hold := func(tx store.Tx) error { return tx.PutEntry(held) }
		if !sameTx {
			if err := s.Update(ctx, hold); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Update(ctx, func(tx store.Tx) error {
			if sameTx {
				if err := hold(tx); err != nil {
					return err
				}
			}
			put, err := tx.PutPrepared(p)
			if put {
				t.Errorf("same tx %v: PutPrepared wrote over a record it was not prepared from", sameTx)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var got *store.EntryRecord
		if err := s.View(ctx, func(tx store.Tx) error { got, err = tx.Entry(first.Entry.Ref()); return err }); err != nil {
			t.Fatal(err)
		}
		if got.Hold != store.HoldResolved || got.Status != first.Status {
			t.Errorf("same tx %v: stored hold %q status %q, want the hold kept", sameTx, got.Hold, got.Status)
		}
	}
}

// TestPutPreparedFreshWritesWhatPutEntryWrites stores a new entry through
// PutEntry in one file and through PrepareEntry(nil, ...) and PutPrepared
// in another, its last_decision set in the transaction after it was
// prepared (a seq of another width than the placeholder's): the files
// hold the same bytes, index keys, counters and payload. Where the key
// already holds a record, or the last_decision the prediction had is
// gone, PutPrepared writes nothing.
func TestPutPreparedFreshWritesWhatPutEntryWrites(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	open := func() *Bolt { return openAt(t, now) }
	for _, seq := range []uint64{0, 7, 123456789} {
		plain, prepared := open(), open()
		rec := copySample()
		rec.LastDecision = seq
		if err := plain.Update(ctx, func(tx store.Tx) error { return tx.PutEntry(rec) }); err != nil {
			t.Fatal(err)
		}
		ahead := copySample()
		if seq != 0 {
			ahead.LastDecision = 1 // set inside, as the intent does
		}
		p := prepared.PrepareEntry(nil, ahead)
		if p == nil {
			t.Fatal("PrepareEntry refused a new record that encodes")
		}
		if err := prepared.Update(ctx, func(tx store.Tx) error {
			p.Next.LastDecision = seq
			put, err := tx.PutPrepared(p)
			if err == nil && !put {
				t.Errorf("seq %d: PutPrepared did not store the new record", seq)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if a, b := dumpEntryBuckets(t, plain), dumpEntryBuckets(t, prepared); !reflect.DeepEqual(a, b) {
			t.Fatalf("seq %d: PutEntry wrote\n%q\nPutPrepared wrote\n%q", seq, a, b)
		}
		// Stored now: the same prepared record is refused, and so is one
		// whose last_decision went to zero after it was predicted.
		again := prepared.PrepareEntry(nil, copySample())
		if err := prepared.Update(ctx, func(tx store.Tx) error {
			if put, err := tx.PutPrepared(again); put || err != nil {
				t.Errorf("seq %d: PutPrepared of a new record over a stored one: put %v, %v", seq, put, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	s := open()
	ahead := copySample()
	ahead.LastDecision = 1
	p := s.PrepareEntry(nil, ahead)
	if err := s.Update(ctx, func(tx store.Tx) error {
		p.Next.LastDecision = 0
		if put, err := tx.PutPrepared(p); put || err != nil {
			t.Errorf("PutPrepared of a record predicted with a last_decision, put without: put %v, %v", put, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// openAt opens a new store in a temporary directory whose clock stands at
// now.
func openAt(t *testing.T, now time.Time) *Bolt {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "replayctl.db"), store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
