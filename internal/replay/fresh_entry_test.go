package replay

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/group"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// TestSameFreshCoversEveryField changes each field of an entry record, one
// at a time, and holds sameFresh to noticing it: a field added to
// EntryRecord (or the entry's identity) that sameFresh does not compare
// would let a record changed after it was worked out ahead be stored as
// predicted. last_decision is the one field the transaction sets; the
// entry's other fields are shaped from the same entry read on both sides.
func TestSameFreshCoversEveryField(t *testing.T) {
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	base := func() *store.EntryRecord {
		return &store.EntryRecord{Entry: entry.Entry{ID: "e1", Source: "jsonl", Scope: "s", Topic: "orders",
			IdempotencyKey: "k1", Message: "503", Attempts: 2, Payload: json.RawMessage(`{"a":1}`)},
			Status: "replaying", Class: "transient", Action: "auto_replay", Owner: "o", ApproverGroup: "g",
			Reason: "r", LastDecision: 3, Evidence: "ev", ApprovalID: "ap", Hold: "h", Probe: "p",
			WriteBackPending: "w", Settled: true, FirstSeen: at, LastSeen: at, NextAttemptAt: at,
			Group: &group.Key{Source: "jsonl", Topic: "orders", Class: "transient", Error: "503"}}
	}
	if !sameFresh(base(), base()) {
		t.Fatal("sameFresh tells two equal records apart")
	}
	skip := map[string]bool{"LastDecision": true}
	entrySkip := map[string]bool{ // shaped from the same entry on both sides (er.Entry = *e)
		"Origin": true, "Lineage": true, "Ancestors": true, "ReasonCode": true, "KeyDerived": true,
		"FirstFailure": true, "LastFailure": true, "Labels": true, "State": true, "History": true, "Raw": true,
		"DecodeError": true,
	}
	rt := reflect.TypeOf(store.EntryRecord{})
	for i := range rt.NumField() {
		f := rt.Field(i)
		if skip[f.Name] {
			continue
		}
		if f.Name == "Entry" {
			et := f.Type
			for j := range et.NumField() {
				ef := et.Field(j)
				if entrySkip[ef.Name] {
					continue
				}
				b := base()
				if !changeValue(reflect.ValueOf(&b.Entry).Elem().Field(j)) {
					t.Errorf("Entry.%s: a field of a kind the test cannot change: add it to sameFresh or to entrySkip with a reason", ef.Name)
					continue
				}
				if sameFresh(b, base()) {
					t.Errorf("sameFresh does not compare Entry.%s", ef.Name)
				}
			}
			continue
		}
		b := base()
		if !changeValue(reflect.ValueOf(b).Elem().Field(i)) {
			t.Errorf("%s: a field of a kind the test cannot change", f.Name)
			continue
		}
		if sameFresh(b, base()) {
			t.Errorf("sameFresh does not compare %s", f.Name)
		}
	}
}

// changeValue changes v to another value of its type (false: a kind it
// does not know).
func changeValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Uint8 {
			return false
		}
		v.SetBytes(append(append([]byte(nil), v.Bytes()...), ' '))
	case reflect.Pointer:
		if v.IsNil() {
			return false
		}
		cp := reflect.New(v.Type().Elem())
		cp.Elem().Set(v.Elem())
		if cp.Elem().Kind() != reflect.Struct || cp.Elem().NumField() == 0 || !changeValue(cp.Elem().Field(0)) {
			return false
		}
		v.Set(cp)
	case reflect.Struct:
		if t, ok := v.Interface().(time.Time); ok {
			v.Set(reflect.ValueOf(t.Add(time.Second)))
			return true
		}
		return false
	default:
		return false
	}
	return true
}

// freshCounting is the bundle's store, noting the new entries' records
// worked out ahead (PrepareEntry with no previous record).
type freshCounting struct {
	*bolt.Bolt
	mu    sync.Mutex
	ahead []*store.EntryRecord
}

func (f *freshCounting) PrepareEntry(prev, next *store.EntryRecord) *store.PreparedEntry {
	if prev == nil {
		f.mu.Lock()
		f.ahead = append(f.ahead, next)
		f.mu.Unlock()
	}
	return f.Bolt.PrepareEntry(prev, next)
}

// TestFreshEntryIsTheRecordTheIntentStores replays new entries: each
// intent's record is worked out before its transaction
// (Reconciler.freshEntry), the transaction sets its last_decision to the
// seq of the decision record it appends and stores it (Tx.PutPrepared),
// and every entry ends replayed with its payload and its decision named.
func TestFreshEntryIsTheRecordTheIntentStores(t *testing.T) {
	b := newBundle(t, baseRules)
	fc := &freshCounting{Bolt: b.store}
	r := b.reconciler(4)
	r.Store = fc
	rep := b.run(r, b.jsonl("dlq.jsonl", transient("e1", "k1"), transient("e2", "k2"), transient("e3", "k3")))
	if rep.Replays.Succeeded != 3 {
		t.Fatalf("%d replayed, want 3", rep.Replays.Succeeded)
	}
	if len(fc.ahead) != 3 {
		t.Fatalf("%d new entries' records worked out ahead, want 3", len(fc.ahead))
	}
	kinds := map[uint64]string{}
	if err := b.store.AuditRange(context.Background(), 1, func(seq uint64, rec audit.Sealed, err error) error {
		if err != nil {
			return err
		}
		var body struct {
			Kind     string `json:"kind"`
			EntryRef string `json:"entry_ref"`
		}
		if err := json.Unmarshal(rec.Body, &body); err != nil {
			return err
		}
		kinds[seq] = body.Kind + " " + body.EntryRef
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, ahead := range fc.ahead {
		ref := ahead.Entry.Ref()
		er := b.entry(ref)
		if ahead.LastDecision != er.LastDecision {
			t.Errorf("%s: worked out ahead with last_decision %d, stored %d: the transaction did not store it", ref, ahead.LastDecision, er.LastDecision)
		}
		if er.Status != store.StatusReplayed || len(er.Entry.Payload) == 0 {
			t.Errorf("%s: status %q payload %q", ref, er.Status, er.Entry.Payload)
		}
		if got := kinds[er.LastDecision]; got != "decision "+ref {
			t.Errorf("%s: last_decision %d is %q", ref, er.LastDecision, got)
		}
	}
}
