package store

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
)

func preparedSample() *EntryRecord {
	at := time.Date(2026, 11, 27, 11, 0, 0, 123456789, time.UTC)
	return &EntryRecord{Entry: entry.Entry{ID: "e1", Source: "jsonl", Topic: "orders", IdempotencyKey: "order-1:email",
		Attempts: 3, Labels: map[string]string{"tenant": "acme"}, Ancestors: []string{"e0"}, LastFailure: at,
		History: []entry.Failure{{Attempt: 1, Time: at, Message: "503"}}, Payload: json.RawMessage(`{"to":"a@b.c"}`)},
		Status: StatusReplaying, Class: "transient", Action: "auto_replay", Reason: "5xx", FirstSeen: at, LastSeen: at,
		Group: &group.Key{Source: "jsonl", Topic: "orders", Class: "transient", Error: "503"}}
}

// dump is every key and value of the buckets a PutEntry writes.
func dump(t *testing.T, s *Bolt) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.db.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketEntries, bucketPayloads, bucketPayloadsZ, bucketIdx, bucketCounters} {
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

// TestPutPreparedWritesWhatPutEntryWrites puts the same two versions of a
// record through PutEntry into one file and through PrepareEntry and
// PutPrepared into another: the files hold the same bytes, index keys
// and counters.
func TestPutPreparedWritesWhatPutEntryWrites(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	open := func() *Bolt {
		s, err := OpenBolt(filepath.Join(t.TempDir(), "replayctl.db"), Options{Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	plain, prepared := open(), open()
	first := preparedSample()
	second := preparedSample()
	second.Status, second.Reason, second.NextAttemptAt = StatusPending, "retry at 12:05", now.Add(5*time.Minute)
	for _, r := range []*EntryRecord{first, second} {
		if err := plain.Update(ctx, func(tx Tx) error { return tx.PutEntry(r) }); err != nil {
			t.Fatal(err)
		}
		p := PrepareEntry(r)
		if p == nil || !p.holds(r) {
			t.Fatal("a record does not hold its own encoding")
		}
		if err := prepared.Update(ctx, func(tx Tx) error { return PutPrepared(tx, r, p) }); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := dump(t, plain), dump(t, prepared); !reflect.DeepEqual(a, b) {
		t.Fatalf("PutEntry wrote\n%q\nPutPrepared wrote\n%q", a, b)
	}
}

// TestPutPreparedEncodesAgainWhenChanged changes the record after it was
// prepared, in place too (its labels, its history): what is stored is
// the record as it is, not as it was prepared.
func TestPutPreparedEncodesAgainWhenChanged(t *testing.T) {
	ctx := context.Background()
	changes := map[string]func(*EntryRecord){
		"status":        func(r *EntryRecord) { r.Status = StatusFailed },
		"label in map":  func(r *EntryRecord) { r.Entry.Labels["tenant"] = "other" },
		"history entry": func(r *EntryRecord) { r.Entry.History[0].Message = "timeout" },
		"ancestor":      func(r *EntryRecord) { r.Entry.Ancestors[0] = "e9" },
		"group":         func(r *EntryRecord) { r.Group.Error = "timeout" },
		"time":          func(r *EntryRecord) { r.LastSeen = r.LastSeen.Add(time.Second) },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			s, err := OpenBolt(filepath.Join(t.TempDir(), "replayctl.db"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			r := preparedSample()
			p := PrepareEntry(r)
			change(r)
			if err := s.Update(ctx, func(tx Tx) error { return PutPrepared(tx, r, p) }); err != nil {
				t.Fatal(err)
			}
			var got *EntryRecord
			if err := s.View(ctx, func(tx Tx) error {
				var err error
				got, err = tx.Entry(r.Entry.Ref())
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, r) {
				t.Fatalf("stored\n%+v\nnot the record put\n%+v", got, r)
			}
		})
	}
}

// TestCloneUnpaidCopiesEveryReference holds cloneUnpaid to EntryRecord: a
// map, slice or pointer added to the record and not copied there would
// let a caller's later change pass for what was encoded.
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
	walk(reflect.TypeFor[EntryRecord](), "")
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
	s, err := OpenBolt(filepath.Join(t.TempDir(), "replayctl.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stored := preparedSample()
	if err := s.Update(ctx, func(tx Tx) error { return tx.PutEntry(stored) }); err != nil {
		t.Fatal(err)
	}
	decodes := 0
	s.onEntryDecode = func() { decodes++ }
	ref := stored.Entry.Ref()
	if err := s.UpdateNow(ctx, func(tx Tx) error {
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
		second.Status = StatusFailed
		if err := tx.PutEntry(second); err != nil {
			return err
		}
		third, err := tx.Entry(ref)
		if err != nil {
			return err
		}
		if third.Status != StatusFailed || !reflect.DeepEqual(third.Entry.Payload, stored.Entry.Payload) {
			t.Errorf("after PutEntry read status %q payload %s", third.Status, third.Entry.Payload)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
