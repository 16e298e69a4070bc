package bolt

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/storetest"
)

// mixedViewsStore is storetest.MixedViews in a new bbolt file at path.
func mixedViewsStore(t *testing.T, path string) *Bolt {
	t.Helper()
	now := storetest.ViewsBase
	s, err := Open(path, store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	storetest.MixedViews(t, s, func(at time.Time) { now = at })
	return s
}

// TestPageTopicsAndAgeMatchScan: several topic globs (a union of the topic
// index's ranges) and an age (the first-seen index's range, or the
// last-failure index's ranges of the states asked for, as a dimension)
// page exactly as a full scan filters, page by page across
// cursors, with an exact total where nothing else narrows them.
func TestPageTopicsAndAgeMatchScan(t *testing.T) {
	ctx := context.Background()
	s := mixedViewsStore(t, filepath.Join(t.TempDir(), "replayctl.db"))
	defer s.Close()
	all := storetest.AllEntries(t, s)
	for name, f := range storetest.ViewFilters() {
		var want []string
		for _, r := range all {
			if f.Match(r) {
				want = append(want, r.Entry.Ref())
			}
		}
		slices.SortFunc(want, func(a, b string) int { return bytes.Compare(store.IKey(a), store.IKey(b)) })
		if (len(want) == 0) != (name == "nothing") || len(want) == len(all) && name != "all" {
			t.Fatalf("%s: the mixed store has %d of %d entries matching: the case proves nothing", name, len(want), len(all))
		}
		var got []string
		cursor := ""
		for range 100 {
			p, err := s.Page(ctx, f, cursor, 7)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got = append(got, storetest.RefsOf(p.Items)...)
			if p.TotalExact && p.Total != int64(len(want)) || p.Total < int64(len(want)) {
				t.Fatalf("%s: total %d (exact %v), scan finds %d", name, p.Total, p.TotalExact, len(want))
			}
			if (name == "two topic globs" || name == "age" || name == "failed by") && !p.TotalExact {
				t.Fatalf("%s: total not exact", name)
			}
			if cursor = p.Next; cursor == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: pages\n got %v\nwant %v", name, got, want)
		}
	}
	// A first-seen range larger than the cap is no dimension: the filter
	// then stays a check on the walk (the path above without the range).
	if err := s.db.View(func(tx *bolt.Tx) error {
		f := store.EntryFilter{FirstSeenBefore: storetest.ViewsBase.Add(9 * 24 * time.Hour)}
		if ageDim(tx.Bucket(bucketIdx), &f, nil, 5) != nil {
			t.Fatalf("a range over the cap was held in memory")
		}
		if h := ageDim(tx.Bucket(bucketIdx), &f, nil, 1000); h == nil || len(h.mem) == 0 {
			t.Fatalf("a small range was not held")
		}
		f = store.EntryFilter{LastFailedBy: storetest.ViewsBase.Add(100 * time.Hour)}
		if failedByDim(tx.Bucket(bucketIdx), &f, []string{store.StatusPending, store.StatusReplayed}, nil, 3) != nil {
			t.Fatalf("a last-failure range over the cap was held in memory")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestSortedPageMatchesScan: sort=oldest|newest pages from the per-state
// last-failure index equal a full scan sorted by last failure then ref
// (reversed for newest), for every filter, across cursors.
func TestSortedPageMatchesScan(t *testing.T) {
	ctx := context.Background()
	s := mixedViewsStore(t, filepath.Join(t.TempDir(), "replayctl.db"))
	defer s.Close()
	all := storetest.AllEntries(t, s)
	for name, f := range storetest.ViewFilters() {
		for _, newest := range []bool{false, true} {
			want := storetest.SortedByLastFailure(all, &f, newest)
			var got []string
			cursor := ""
			for range 100 {
				p, err := s.SortedPage(ctx, f, newest, cursor, 9)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got = append(got, storetest.RefsOf(p.Items)...)
				if p.Total < int64(len(want)) || p.TotalExact && p.Total != int64(len(want)) {
					t.Fatalf("%s: total %d (exact %v), scan finds %d", name, p.Total, p.TotalExact, len(want))
				}
				if cursor = p.Next; cursor == "" {
					break
				}
			}
			if w := storetest.RefsOf(want); !slices.Equal(got, w) {
				t.Fatalf("%s newest=%v:\n got %v\nwant %v", name, newest, got, w)
			}
		}
	}
}

// TestAuditSeqsMatchScan: audit filters by actor, kind and time (and
// their combinations) from the audit indexes equal audit.Query's match
// over the whole chain.
func TestAuditSeqsMatchScan(t *testing.T) {
	ctx := context.Background()
	s := mixedViewsStore(t, filepath.Join(t.TempDir(), "replayctl.db"))
	defer s.Close()
	since, until := storetest.ViewsBase.Add(100*time.Hour), storetest.ViewsBase.Add(300*time.Hour)
	for name, f := range map[string]store.AuditFilter{
		"actor":            {Actor: "alice"},
		"kind":             {Kind: audit.KindOutcome},
		"since":            {Since: since},
		"until":            {Until: until},
		"window":           {Since: since, Until: until},
		"actor and kind":   {Actor: "bob", Kind: audit.KindResolve},
		"actor and window": {Actor: "ops-bot", Since: since, Until: until},
		"all of them":      {Actor: "alice", Kind: audit.KindDecision, Since: since},
		"unknown actor":    {Actor: "mallory"},
	} {
		var want []uint64
		q := audit.Query{Actor: f.Actor, Kind: f.Kind, Since: f.Since}
		if err := audit.Each(ctx, s, q, func(r audit.Record) error {
			if f.Until.IsZero() || !r.Time.After(f.Until) {
				want = append(want, r.Seq)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		got, err := s.AuditSeqs(ctx, f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s:\n got %v\nwant %v", name, got, want)
		}
		if name != "unknown actor" && len(want) == 0 {
			t.Fatalf("%s: the mixed store has no such records: the test proves nothing", name)
		}
	}
}

// TestApprovalsByStateMatchScan: each state's requests from the index by
// state equal a scan of every request, after requests changed state.
func TestApprovalsByStateMatchScan(t *testing.T) {
	ctx := context.Background()
	s := mixedViewsStore(t, filepath.Join(t.TempDir(), "replayctl.db"))
	defer s.Close()
	for _, states := range [][]string{{store.ApprovalPending}, {store.ApprovalApproved}, {"REJECTED"}, {store.ApprovalExpired, store.ApprovalPending}, {store.ApprovalStale}, nil} {
		var want, got []string
		if err := s.Approvals(ctx, func(a *store.Approval) error {
			if len(states) == 0 || slices.ContainsFunc(states, func(st string) bool { return strings.EqualFold(st, a.State) }) {
				want = append(want, a.ID)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.ApprovalsByState(ctx, states, func(a *store.Approval) error { got = append(got, a.ID); return nil }); err != nil {
			t.Fatal(err)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) || len(want) == 0 {
			t.Fatalf("states %v:\n got %v\nwant %v", states, got, want)
		}
	}
}

// TestViewsBuiltOnFirstReadWriteOpen: a file indexed by an older version
// (no view keys) gets them on its first read-write open, and they answer
// as the live ones did.
func TestViewsBuiltOnFirstReadWriteOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "replayctl.db")
	s := mixedViewsStore(t, path)
	f := store.EntryFilter{States: []string{store.StatusPending, store.StatusQuarantined}}
	live, err := s.SortedPage(ctx, f, true, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	liveSeqs, err := s.AuditSeqs(ctx, store.AuditFilter{Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		idx := tx.Bucket(bucketIdx)
		c := idx.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if strings.ContainsRune("LFAKTP", rune(k[0])) {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return tx.Bucket(bucketMeta).Put(keyIndexVer, []byte("3"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err = Open(path, store.Options{Now: func() time.Time { return storetest.ViewsBase.Add(50 * 24 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.SortedPage(ctx, f, true, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(storetest.RefsOf(got.Items), storetest.RefsOf(live.Items)) || len(got.Items) == 0 {
		t.Fatalf("sorted page after the rebuild\n got %v\nwant %v", storetest.RefsOf(got.Items), storetest.RefsOf(live.Items))
	}
	seqs, err := s.AuditSeqs(ctx, store.AuditFilter{Actor: "alice"})
	if err != nil || !slices.Equal(seqs, liveSeqs) {
		t.Fatalf("audit seqs after the rebuild: %v %v, want %v", seqs, err, liveSeqs)
	}
}
