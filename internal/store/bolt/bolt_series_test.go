package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// TestSeriesByClassEqualsRecount: after a mixed run (new entries of three
// classes over several hours, a reclassification, entries drained by
// replay and by resolve, one reopened and drained again), the per-class
// hourly inflow equals a recount of the entries by first-seen hour and
// class, and the per-class drained counts equal the transitions made; a
// rebuild of the indexes (an old file's first read-write open) recounts
// the inflow and keeps the drained events.
func TestSeriesByClassEqualsRecount(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "replayctl.db")
	base := time.Date(2026, 11, 20, 6, 0, 0, 0, time.UTC)
	now := base
	s, err := Open(path, store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	classes := []triage.Class{triage.Transient, triage.Poison, triage.Governance}
	put := func(r *store.EntryRecord) {
		t.Helper()
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutEntry(r) }); err != nil {
			t.Fatal(err)
		}
	}
	get := func(ref string) *store.EntryRecord {
		t.Helper()
		var r *store.EntryRecord
		if err := s.View(ctx, func(tx store.Tx) error { var err error; r, err = tx.Entry(ref); return err }); err != nil || r == nil {
			t.Fatalf("entry %s: %v", ref, err)
		}
		return r
	}
	wantDrained := map[time.Time]map[string]int64{}
	drain := func(ref, status string) {
		t.Helper()
		r := get(ref)
		if !store.IsOpen(r.Status) {
			t.Fatalf("%s is not open", ref)
		}
		r.Status = status
		put(r)
		h := now.Truncate(time.Hour)
		if wantDrained[h] == nil {
			wantDrained[h] = map[string]int64{}
		}
		wantDrained[h][string(r.Class)]++
	}
	var refs []string
	for i := range 30 {
		now = base.Add(time.Duration(i%5)*time.Hour + time.Duration(i)*time.Minute)
		r := &store.EntryRecord{Entry: entry.Entry{ID: fmt.Sprintf("e%02d", i), Source: "jsonl", Topic: "orders.created", Payload: []byte(`{}`)},
			Status: store.StatusPending, Class: classes[i%3], Action: triage.AutoReplay, FirstSeen: now}
		put(r)
		refs = append(refs, r.Entry.Ref())
	}
	now = base.Add(6 * time.Hour)
	// A re-triage reclassifies one entry: its inflow moves to the new class.
	r := get(refs[2])
	r.Class = triage.Transient
	put(r)
	for i := 0; i < 30; i += 4 {
		drain(refs[i], store.StatusReplayed)
	}
	now = base.Add(7*time.Hour + 30*time.Minute)
	for i := 1; i < 30; i += 6 {
		drain(refs[i], store.StatusResolved)
	}
	// Reopened (it failed again) and drained again an hour later: two events.
	r = get(refs[0])
	r.Status = store.StatusPending
	put(r)
	now = base.Add(8 * time.Hour)
	drain(refs[0], store.StatusResolved)

	check := func(what string) {
		t.Helper()
		wantIn := map[time.Time]map[string]int64{}
		if err := s.Entries(ctx, func(r *store.EntryRecord) error {
			h := r.FirstSeen.UTC().Truncate(time.Hour)
			if wantIn[h] == nil {
				wantIn[h] = map[string]int64{}
			}
			wantIn[h][string(r.Class)]++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		hours, err := s.Series(ctx, base, base.Add(10*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		gotIn, gotDr := map[time.Time]map[string]int64{}, map[time.Time]map[string]int64{}
		for _, h := range hours {
			var sumIn, sumDr int64
			for _, n := range h.InflowByClass {
				sumIn += n
			}
			for _, n := range h.DrainedByClass {
				sumDr += n
			}
			if sumIn != h.Inflow || sumDr != h.Drained {
				t.Fatalf("%s: hour %s: by class %d/%d, totals %d/%d", what, h.Hour, sumIn, sumDr, h.Inflow, h.Drained)
			}
			if h.InflowByClass != nil {
				gotIn[h.Hour] = h.InflowByClass
			}
			if h.DrainedByClass != nil {
				gotDr[h.Hour] = h.DrainedByClass
			}
		}
		if !reflect.DeepEqual(gotIn, wantIn) {
			t.Fatalf("%s: inflow by class\n got %v\nwant %v", what, gotIn, wantIn)
		}
		if !reflect.DeepEqual(gotDr, wantDrained) {
			t.Fatalf("%s: drained by class\n got %v\nwant %v", what, gotDr, wantDrained)
		}
	}
	check("live")
	if got := wantDrained[base.Add(6*time.Hour)][string(triage.Transient)]; got == 0 {
		t.Fatalf("the run drained no transient entry at 06h+6: %v", wantDrained)
	}
	s.Close()

	// An older index version: the next read-write open rebuilds.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyIndexVer, []byte("3")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err = Open(path, store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("rebuilt")
}
