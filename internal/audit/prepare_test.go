package audit

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/triage"
)

// sample is a record with every field set, characters json.Marshal
// escapes included.
func sample() *Record {
	in := &entry.Entry{ID: "j<1>", Source: "cordum", IdempotencyKey: "k&1", Labels: map[string]string{"a": "b"}}
	return &Record{Actor: "alice", Kind: KindOutcome, EntryRef: "cordum:j<1>", EntryID: "j<1>", Source: "cordum",
		Key: "k&1", Decision: &triage.Decision{EntryID: "j<1>", Reasons: []string{"transient \"5xx\""}}, Input: in,
		Action: triage.AutoReplay, Reason: "replay 1 of 3 to sink <a&b>", PolicySnapshot: "sha256:abc",
		LedgerBefore: "dispatching", LedgerAfter: "succeeded", Outcome: "succeeded",
		Detail: json.RawMessage(`{"target":"sink","attempt":1}`)}
}

// place sets what Append sets: seq, time and, when the store keeps the
// policy snapshot, SnapshotKept.
func place(r *Record, seq uint64, kept bool) {
	r.Seq, r.Time = seq, time.Date(2026, 11, 27, 11, 0, 0, 123456789, time.UTC)
	if r.PolicySnapshot != "" && kept {
		r.SnapshotKept = true
	}
}

func sealPlain(t *testing.T, r *Record, prev string) Sealed {
	t.Helper()
	plain := *r
	plain.prep = nil
	s, err := Seal(&plain, prev)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPreparedSealIsPlainSeal(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  func() *Record
		kept bool
	}{
		{"every field, snapshot kept", sample, true},
		{"every field, snapshot missing", sample, false},
		{"bare", func() *Record { return &Record{Actor: "a", Kind: KindBreaker} }, false},
		{"snapshot last", func() *Record { return &Record{Actor: "a", Kind: KindDispatch, PolicySnapshot: "sha256:abc"} }, true},
		{"snapshot, then ledger only", func() *Record {
			return &Record{Actor: "a", Kind: KindDispatch, PolicySnapshot: "s", LedgerAfter: "dispatching"}
		}, true},
		{"snapshot kept by the caller", func() *Record { r := sample(); r.SnapshotKept = true; return r }, true},
		{"detail not compact", func() *Record { r := sample(); r.Detail = json.RawMessage(`{ "a" : [1, 2] }`); return r }, true},
		{"detail that looks like the snapshot", func() *Record {
			r := sample()
			r.Detail = json.RawMessage(`{"policy_snapshot":"sha256:abc","snapshot_kept":true}`)
			r.Decision.PolicySnapshot = "sha256:abc"
			return r
		}, true},
		{"time set by the caller", func() *Record { r := sample(); r.Time = time.Unix(5, 0).UTC(); return r }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rec()
			Prepare(r)
			if r.prep == nil {
				t.Fatal("nothing prepared")
			}
			place(r, 4711, tc.kept)
			if b, err := r.preparedBody(); b == nil || err != nil {
				t.Fatalf("the prepared body was not used (%v): the record was encoded again", err)
			}
			got, err := Seal(r, Genesis)
			if err != nil {
				t.Fatal(err)
			}
			if want := sealPlain(t, r, Genesis); !reflect.DeepEqual(got, want) {
				t.Fatalf("prepared seal\n%s\nplain seal\n%s", got.Body, want.Body)
			}
		})
	}
}

// TestPreparedChangedAfterwardIsEncodedAgain changes each field after
// Prepare: the sealed body must say what the record says, not what it
// said when prepared.
func TestPreparedChangedAfterwardIsEncodedAgain(t *testing.T) {
	changes := map[string]func(*Record){
		"Actor":          func(r *Record) { r.Actor = "bob" },
		"Kind":           func(r *Record) { r.Kind = KindDispatch },
		"EntryRef":       func(r *Record) { r.EntryRef = "cordum:j2" },
		"EntryID":        func(r *Record) { r.EntryID = "j2" },
		"Source":         func(r *Record) { r.Source = "nexora" },
		"Key":            func(r *Record) { r.Key = "k2" },
		"Decision":       func(r *Record) { d := *r.Decision; d.EntryID = "j2"; r.Decision = &d },
		"Input":          func(r *Record) { in := *r.Input; in.ID = "j2"; r.Input = &in },
		"Action":         func(r *Record) { r.Action = triage.Quarantine },
		"Reason":         func(r *Record) { r.Reason = "replay 2 of 3" },
		"PolicySnapshot": func(r *Record) { r.PolicySnapshot = "sha256:def" },
		"SnapshotKept":   func(r *Record) { r.PolicySnapshot = ""; r.SnapshotKept = true },
		"LedgerBefore":   func(r *Record) { r.LedgerBefore = "decided" },
		"LedgerAfter":    func(r *Record) { r.LedgerAfter = "retry" },
		"Outcome":        func(r *Record) { r.Outcome = "retry" },
		"Detail":         func(r *Record) { r.Detail[len(r.Detail)-2] = '2' }, // in place
	}
	for _, name := range recordFields(t) {
		if name == "Seq" || name == "Time" {
			continue
		}
		change, ok := changes[name]
		if !ok {
			t.Errorf("no change of Record.%s tried: add one", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			r := sample()
			Prepare(r)
			if r.prep == nil {
				t.Fatal("nothing prepared")
			}
			change(r)
			place(r, 9, true)
			got, err := Seal(r, Genesis)
			if err != nil {
				t.Fatal(err)
			}
			if want := sealPlain(t, r, Genesis); !reflect.DeepEqual(got, want) {
				t.Fatalf("sealed what was prepared\n%s\nnot what the record holds\n%s", got.Body, want.Body)
			}
		})
	}
}

// TestPreparedComparesEveryField holds sameButPlace to Record: a field
// added to Record and not compared would let a stale encoding through.
func TestPreparedComparesEveryField(t *testing.T) {
	want := []string{"Seq", "Time", "Actor", "Kind", "EntryRef", "EntryID", "Source", "Key", "Decision", "Input",
		"Action", "Reason", "PolicySnapshot", "SnapshotKept", "LedgerBefore", "LedgerAfter", "Outcome", "Detail"}
	if got := recordFields(t); !slices.Equal(got, want) {
		t.Fatalf("Record's fields are %v; sameButPlace and this test know %v: compare the new field there", got, want)
	}
}

func recordFields(t *testing.T) []string {
	t.Helper()
	var out []string
	rt := reflect.TypeFor[Record]()
	for i := range rt.NumField() {
		if f := rt.Field(i); f.IsExported() {
			out = append(out, f.Name)
		}
	}
	return out
}
