package store

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/triage"
)

// viewsBase is the mixed store's clock origin.
var viewsBase = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

// mixedViewsStore writes entries of several states, classes and topics
// (some without a first-seen or last-failure time, some sharing one), then
// moves some of them (state and last failure change, as a reconcile
// does); audit records by several actors and kinds over 30 days; approval
// requests in every state, some decided after they were asked.
func mixedViewsStore(t *testing.T, path string) *Bolt {
	t.Helper()
	ctx := context.Background()
	now := viewsBase
	s, err := OpenBolt(path, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	states := []string{StatusPending, StatusReplayed, StatusQuarantined, StatusAwaitingApproval, StatusResolved}
	classes := []triage.Class{triage.Transient, triage.Poison, triage.Governance}
	topics := []string{"orders.created", "orders.paid.eu", "billing.invoice", "tool.email.send", "tool.alpha.send"}
	if err := s.Update(ctx, func(tx Tx) error {
		for i := range 240 {
			r := &EntryRecord{Entry: entry.Entry{ID: fmt.Sprintf("v%03d", (i*37)%240), Source: []string{"jsonl", "prodigy"}[i%2],
				Topic: topics[i%len(topics)], Payload: []byte(`{}`)},
				Status: states[i%len(states)], Class: classes[i%3], Action: triage.AutoReplay}
			if i%11 != 0 {
				r.FirstSeen = viewsBase.Add(time.Duration(i%30) * 24 * time.Hour)
			}
			switch {
			case i%7 == 0: // no last failure: sorted by first seen
			case i%5 == 0:
				r.Entry.LastFailure = viewsBase.Add(48 * time.Hour) // ties
			default:
				r.Entry.LastFailure = viewsBase.Add(time.Duration((i*13)%500) * time.Hour)
			}
			if err := tx.PutEntry(r); err != nil {
				return err
			}
		}
		actors := []string{"ops-bot", "alice", "bob"}
		kinds := []string{audit.KindDecision, audit.KindOutcome, audit.KindResolve, audit.KindApproval}
		for i := range 300 {
			if _, err := tx.Append(&audit.Record{Kind: kinds[i%len(kinds)], Actor: actors[(i/2)%len(actors)],
				EntryRef: fmt.Sprintf("jsonl:v%03d", i%240), Time: viewsBase.Add(time.Duration(i) * 137 * time.Minute)}); err != nil {
				return err
			}
		}
		for i := range 60 {
			a := &Approval{ID: fmt.Sprintf("ap%02d", i), EntryRef: fmt.Sprintf("jsonl:v%03d", i), ApproverGroup: []string{"oncall", "payments"}[i%2],
				State: ApprovalPending, RequestedAt: viewsBase.Add(time.Duration(60-i) * time.Hour), ExpiresAt: viewsBase.Add(time.Duration(100+i) * time.Hour)}
			if err := tx.PutApproval(a); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A second pass moves entries and decides requests.
	now = viewsBase.Add(40 * 24 * time.Hour)
	if err := s.Update(ctx, func(tx Tx) error {
		for i := 0; i < 240; i += 3 {
			ref := fmt.Sprintf("%s:v%03d", []string{"jsonl", "prodigy"}[i%2], (i*37)%240)
			r, err := tx.Entry(ref)
			if err != nil || r == nil {
				return fmt.Errorf("entry %s: %v", ref, err)
			}
			r.Status = states[(i+2)%len(states)]
			r.Entry.LastFailure = viewsBase.Add(time.Duration(i) * 90 * time.Minute)
			if err := tx.PutEntry(r); err != nil {
				return err
			}
		}
		astates := []string{ApprovalApproved, ApprovalRejected, ApprovalExpired, ApprovalStale}
		for i := 0; i < 60; i += 2 {
			a, err := tx.Approval(fmt.Sprintf("ap%02d", i))
			if err != nil || a == nil {
				return fmt.Errorf("approval ap%02d: %v", i, err)
			}
			a.State = astates[(i/2)%len(astates)]
			if err := tx.PutApproval(a); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

func allEntries(t *testing.T, s *Bolt) []*EntryRecord {
	t.Helper()
	var out []*EntryRecord
	if err := s.Entries(context.Background(), func(r *EntryRecord) error { out = append(out, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func refsOf(rs []*EntryRecord) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Entry.Ref())
	}
	return out
}

// viewFilters are the entry filters each view test runs.
func viewFilters() map[string]EntryFilter {
	return map[string]EntryFilter{
		"all":              {},
		"open states":      {States: []string{StatusPending, StatusQuarantined, StatusAwaitingApproval}},
		"class":            {Classes: []string{"POISON"}},
		"state and source": {States: []string{StatusReplayed}, Sources: []string{"prodigy"}},
		"two topic globs":  {Topics: []string{"orders.**", "tool.*.send"}},
		"topic and globs":  {Topic: "billing.*", Topics: []string{"orders.paid.*"}, States: []string{StatusPending, StatusResolved}},
		"age":              {FirstSeenBefore: viewsBase.Add(5 * 24 * time.Hour)},
		"age and class":    {FirstSeenBefore: viewsBase.Add(20 * 24 * time.Hour), Classes: []string{string(triage.Transient)}},
		"age and q":        {FirstSeenBefore: viewsBase.Add(20 * 24 * time.Hour), Q: "v1"},
		"nothing":          {States: []string{"no-such-state"}},
		"failed by":        {LastFailedBy: viewsBase.Add(60 * time.Hour)},
		"failed by, state": {LastFailedBy: viewsBase.Add(200 * time.Hour), States: []string{StatusPending, StatusResolved}},
		"failed by, glob":  {LastFailedBy: viewsBase.Add(300 * time.Hour), Topics: []string{"tool.**"}},
	}
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
	all := allEntries(t, s)
	for name, f := range viewFilters() {
		var want []string
		for _, r := range all {
			if f.Match(r) {
				want = append(want, r.Entry.Ref())
			}
		}
		slices.SortFunc(want, func(a, b string) int { return bytes.Compare(ikey(a), ikey(b)) })
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
			got = append(got, refsOf(p.Items)...)
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
		f := EntryFilter{FirstSeenBefore: viewsBase.Add(9 * 24 * time.Hour)}
		if ageDim(tx.Bucket(bucketIdx), &f, nil, 5) != nil {
			t.Fatalf("a range over the cap was held in memory")
		}
		if h := ageDim(tx.Bucket(bucketIdx), &f, nil, 1000); h == nil || len(h.mem) == 0 {
			t.Fatalf("a small range was not held")
		}
		f = EntryFilter{LastFailedBy: viewsBase.Add(100 * time.Hour)}
		if failedByDim(tx.Bucket(bucketIdx), &f, []string{StatusPending, StatusReplayed}, nil, 3) != nil {
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
	all := allEntries(t, s)
	for name, f := range viewFilters() {
		for _, newest := range []bool{false, true} {
			want := sortedByLastFailure(all, &f, newest)
			var got []string
			cursor := ""
			for range 100 {
				p, err := s.SortedPage(ctx, f, newest, cursor, 9)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got = append(got, refsOf(p.Items)...)
				if p.Total < int64(len(want)) || p.TotalExact && p.Total != int64(len(want)) {
					t.Fatalf("%s: total %d (exact %v), scan finds %d", name, p.Total, p.TotalExact, len(want))
				}
				if cursor = p.Next; cursor == "" {
					break
				}
			}
			if w := refsOf(want); !slices.Equal(got, w) {
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
	since, until := viewsBase.Add(100*time.Hour), viewsBase.Add(300*time.Hour)
	for name, f := range map[string]AuditFilter{
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
	for _, states := range [][]string{{ApprovalPending}, {ApprovalApproved}, {"REJECTED"}, {ApprovalExpired, ApprovalPending}, {ApprovalStale}, nil} {
		var want, got []string
		if err := s.Approvals(ctx, func(a *Approval) error {
			if len(states) == 0 || slices.ContainsFunc(states, func(st string) bool { return strings.EqualFold(st, a.State) }) {
				want = append(want, a.ID)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.ApprovalsByState(ctx, states, func(a *Approval) error { got = append(got, a.ID); return nil }); err != nil {
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
	f := EntryFilter{States: []string{StatusPending, StatusQuarantined}}
	live, err := s.SortedPage(ctx, f, true, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	liveSeqs, err := s.AuditSeqs(ctx, AuditFilter{Actor: "alice"})
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
	s, err = OpenBolt(path, Options{Now: func() time.Time { return viewsBase.Add(50 * 24 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.SortedPage(ctx, f, true, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(refsOf(got.Items), refsOf(live.Items)) || len(got.Items) == 0 {
		t.Fatalf("sorted page after the rebuild\n got %v\nwant %v", refsOf(got.Items), refsOf(live.Items))
	}
	seqs, err := s.AuditSeqs(ctx, AuditFilter{Actor: "alice"})
	if err != nil || !slices.Equal(seqs, liveSeqs) {
		t.Fatalf("audit seqs after the rebuild: %v %v, want %v", seqs, err, liveSeqs)
	}
}

// sortedByLastFailure is what a sorted page must list, by a scan: the
// entries f matches, by last failure then stored ref (reversed for newest).
func sortedByLastFailure(all []*EntryRecord, f *EntryFilter, newest bool) []*EntryRecord {
	var want []*EntryRecord
	for _, r := range all {
		if f.Match(r) {
			want = append(want, r)
		}
	}
	slices.SortFunc(want, func(a, b *EntryRecord) int {
		c := LastFailure(a).Compare(LastFailure(b))
		if c == 0 {
			c = bytes.Compare(ikey(a.Entry.Ref()), ikey(b.Entry.Ref()))
		}
		if newest {
			c = -c
		}
		return c
	})
	return want
}
