package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/group"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// groupsFromScan is what Groups must say, computed from every entry.
func groupsFromScan(t *testing.T, s store.Backend, now time.Time) map[string]store.GroupSummary {
	t.Helper()
	out := map[string]store.GroupSummary{}
	hours := map[time.Time]int{}
	cur := now.UTC().Truncate(time.Hour)
	for i := 0; i < 24; i++ {
		hours[cur.Add(time.Duration(i-23)*time.Hour)] = i
	}
	err := s.Entries(context.Background(), func(r *store.EntryRecord) error {
		id := store.GroupID(r)
		g, ok := out[id]
		if !ok {
			g = store.GroupSummary{ID: id, Key: store.GroupKey(r), Hourly: make([]int64, 24)}
		}
		g.Total++
		if store.IsOpen(r.Status) {
			g.Open++
		}
		if i, ok := hours[r.FirstSeen.UTC().Truncate(time.Hour)]; ok && !r.FirstSeen.IsZero() {
			g.Hourly[i]++
		}
		if g.First.IsZero() || r.FirstSeen.Before(g.First) {
			g.First = r.FirstSeen
		}
		if r.FirstSeen.After(g.Last) {
			g.Last = r.FirstSeen
		}
		out[id] = g
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkGroups compares Groups and Group with a scan.
func checkGroups(t *testing.T, s store.Backend, now time.Time) []store.GroupSummary {
	t.Helper()
	ctx := context.Background()
	want := groupsFromScan(t, s, now)
	got, err := s.Groups(ctx, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if top, err := s.Groups(ctx, now, 2); err != nil || len(top) != min(2, len(got)) || len(top) > 0 && top[0].ID != got[0].ID || len(top) > 0 && len(top[0].Hourly) != 24 {
		t.Errorf("the top 2 groups: %+v %v", top, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d groups, want %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[g.ID]
		if g.Total != w.Total || g.Open != w.Open || !reflect.DeepEqual(g.Hourly, w.Hourly) || g.Key != w.Key {
			t.Errorf("group %s: total %d open %d hourly %v key %+v; want %d %d %v %+v", g.ID, g.Total, g.Open, g.Hourly, g.Key, w.Total, w.Open, w.Hourly, w.Key)
		}
		if !g.First.Equal(w.First) || !g.Last.Equal(w.Last) {
			t.Errorf("group %s: first %v last %v, want %v %v", g.ID, g.First, g.Last, w.First, w.Last)
		}
		if g.Sample == "" {
			t.Errorf("group %s: no sample", g.ID)
		}
		if i > 0 && (got[i-1].Open < g.Open || got[i-1].Open == g.Open && got[i-1].Total < g.Total) {
			t.Errorf("not largest open first: %s (%d) after %s (%d)", g.ID, g.Open, got[i-1].ID, got[i-1].Open)
		}
		one, err := s.Group(ctx, g.ID, now)
		if err != nil || one.Total != g.Total || one.Open != g.Open || one.Sample != g.Sample {
			t.Errorf("Group(%s) = %+v, %v; Groups said %+v", g.ID, one, err, g)
		}
	}
	return got
}

// groupsFollowWrites: the group counters move with every entry write in
// its own transaction (status, class and message changes move entries
// between groups), a rolled-back write moves nothing, and a lifecycle
// change is written with its audit record.
func groupsFollowWrites(t *testing.T, s store.Backend) {
	ctx := context.Background()
	base := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	recs := indexFixture(t, s, base)
	now := base.Add(30 * time.Hour)
	before := checkGroups(t, s, now)
	if len(before) < 3 {
		t.Fatalf("the fixture makes %d groups, want several", len(before))
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		for _, i := range []int{0, 3, 11, 12} {
			r, err := tx.Entry(recs[i].Entry.Ref())
			if err != nil {
				return err
			}
			r.Status, r.Class = store.StatusReplayed, triage.Poison
			if i == 12 {
				r.Status, r.Entry.Message = store.StatusPending, "connection refused by 10.1.2.3"
			}
			if i == 3 { // a signature rules.yaml configured, recorded with the entry
				r.Group = &group.Key{Source: r.Entry.Source, Class: string(r.Class), Error: "timeout: upstream timeout"}
			}
			if err := tx.PutEntry(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s, now)
	_ = s.Update(ctx, func(tx store.Tx) error {
		r, _ := tx.Entry(recs[1].Entry.Ref())
		r.Entry.Message = "something else entirely"
		if err := tx.PutEntry(r); err != nil {
			return err
		}
		return fmt.Errorf("roll back")
	})
	checkGroups(t, s, now)

	// Lifecycle: refused for a bad id or a hold without a reason; written
	// with its audit record.
	id := before[0].ID
	for _, bad := range []*store.GroupState{{ID: "nope", State: store.GroupAcknowledged}, {ID: id, State: store.GroupHeld}, {ID: id, State: "gone"}} {
		err := s.Update(ctx, func(tx store.Tx) error { return tx.PutGroupState(bad) })
		if !errors.Is(err, store.ErrBadGroup) {
			t.Errorf("PutGroupState(%+v) = %v, want ErrBadGroup", bad, err)
		}
	}
	until := now.Add(time.Hour)
	if err := s.Update(ctx, func(tx store.Tx) error {
		sealed, err := tx.Append(&audit.Record{Actor: "alice", Kind: "group", Reason: "payments fix pending"})
		if err != nil {
			return err
		}
		return tx.PutGroupState(&store.GroupState{ID: id, State: store.GroupHeld, Reason: "payments fix pending", Until: until, By: "alice", At: now, AuditSeq: sealed.Seq})
	}); err != nil {
		t.Fatal(err)
	}
	g, err := s.Group(ctx, id, now)
	if err != nil || g.State != store.GroupHeld || g.Lifecycle == nil || g.Lifecycle.Reason != "payments fix pending" || g.Lifecycle.AuditSeq == 0 {
		t.Fatalf("held group: %+v %v", g, err)
	}
	if g, _ := s.Group(ctx, id, until.Add(time.Second)); g.State != store.GroupOpen {
		t.Errorf("an expired hold reads %q, want open", g.State)
	}
	n := 0
	if err := s.GroupStates(ctx, func(st *store.GroupState) error { n++; return nil }); err != nil || n != 1 {
		t.Errorf("GroupStates: %d, %v", n, err)
	}
	if _, err := s.Group(ctx, "g00000000000", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown group: %v", err)
	}
}
