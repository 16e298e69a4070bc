package bolt

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

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
