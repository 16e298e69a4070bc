package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// ViewsBase is the mixed store's clock origin (MixedViews).
var ViewsBase = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

// MixedViews writes entries of several states, classes and topics
// (some without a first-seen or last-failure time, some sharing one), then
// moves some of them (state and last failure change, as a reconcile
// does); audit records by several actors and kinds over 30 days; approval
// requests in every state, some decided after they were asked. s's clock
// reads ViewsBase for the first pass; setNow moves it 40 days on for the
// second (the backends' views test bbolt's, and copy it into PostgreSQL).
func MixedViews(t *testing.T, s store.Backend, setNow func(time.Time)) {
	t.Helper()
	ctx := context.Background()
	states := []string{store.StatusPending, store.StatusReplayed, store.StatusQuarantined, store.StatusAwaitingApproval, store.StatusResolved}
	classes := []triage.Class{triage.Transient, triage.Poison, triage.Governance}
	topics := []string{"orders.created", "orders.paid.eu", "billing.invoice", "tool.email.send", "tool.alpha.send"}
	if err := s.Update(ctx, func(tx store.Tx) error {
		for i := range 240 {
			r := &store.EntryRecord{Entry: entry.Entry{ID: fmt.Sprintf("v%03d", (i*37)%240), Source: []string{"jsonl", "other"}[i%2],
				Topic: topics[i%len(topics)], Payload: []byte(`{}`)},
				Status: states[i%len(states)], Class: classes[i%3], Action: triage.AutoReplay}
			if i%11 != 0 {
				r.FirstSeen = ViewsBase.Add(time.Duration(i%30) * 24 * time.Hour)
			}
			switch {
			case i%7 == 0: // no last failure: sorted by first seen
			case i%5 == 0:
				r.Entry.LastFailure = ViewsBase.Add(48 * time.Hour) // ties
			default:
				r.Entry.LastFailure = ViewsBase.Add(time.Duration((i*13)%500) * time.Hour)
			}
			if err := tx.PutEntry(r); err != nil {
				return err
			}
		}
		actors := []string{"ops-bot", "alice", "bob"}
		kinds := []string{audit.KindDecision, audit.KindOutcome, audit.KindResolve, audit.KindApproval}
		for i := range 300 {
			if _, err := tx.Append(&audit.Record{Kind: kinds[i%len(kinds)], Actor: actors[(i/2)%len(actors)],
				EntryRef: fmt.Sprintf("jsonl:v%03d", i%240), Time: ViewsBase.Add(time.Duration(i) * 137 * time.Minute)}); err != nil {
				return err
			}
		}
		for i := range 60 {
			a := &store.Approval{ID: fmt.Sprintf("ap%02d", i), EntryRef: fmt.Sprintf("jsonl:v%03d", i), ApproverGroup: []string{"oncall", "payments"}[i%2],
				State: store.ApprovalPending, RequestedAt: ViewsBase.Add(time.Duration(60-i) * time.Hour), ExpiresAt: ViewsBase.Add(time.Duration(100+i) * time.Hour)}
			if err := tx.PutApproval(a); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A second pass moves entries and decides requests.
	setNow(ViewsBase.Add(40 * 24 * time.Hour))
	if err := s.Update(ctx, func(tx store.Tx) error {
		for i := 0; i < 240; i += 3 {
			ref := fmt.Sprintf("%s:v%03d", []string{"jsonl", "other"}[i%2], (i*37)%240)
			r, err := tx.Entry(ref)
			if err != nil || r == nil {
				return fmt.Errorf("entry %s: %v", ref, err)
			}
			r.Status = states[(i+2)%len(states)]
			r.Entry.LastFailure = ViewsBase.Add(time.Duration(i) * 90 * time.Minute)
			if err := tx.PutEntry(r); err != nil {
				return err
			}
		}
		astates := []string{store.ApprovalApproved, store.ApprovalRejected, store.ApprovalExpired, store.ApprovalStale}
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
}

// AllEntries lists s's entries by a scan.
func AllEntries(t *testing.T, s store.Backend) []*store.EntryRecord {
	t.Helper()
	var out []*store.EntryRecord
	if err := s.Entries(context.Background(), func(r *store.EntryRecord) error { out = append(out, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// RefsOf lists the records' refs.
func RefsOf(rs []*store.EntryRecord) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Entry.Ref())
	}
	return out
}

// ViewFilters are the entry filters each view test runs.
func ViewFilters() map[string]store.EntryFilter {
	return map[string]store.EntryFilter{
		"all":              {},
		"open states":      {States: []string{store.StatusPending, store.StatusQuarantined, store.StatusAwaitingApproval}},
		"class":            {Classes: []string{"POISON"}},
		"state and source": {States: []string{store.StatusReplayed}, Sources: []string{"other"}},
		"two topic globs":  {Topics: []string{"orders.**", "tool.*.send"}},
		"topic and globs":  {Topic: "billing.*", Topics: []string{"orders.paid.*"}, States: []string{store.StatusPending, store.StatusResolved}},
		"age":              {FirstSeenBefore: ViewsBase.Add(5 * 24 * time.Hour)},
		"age and class":    {FirstSeenBefore: ViewsBase.Add(20 * 24 * time.Hour), Classes: []string{string(triage.Transient)}},
		"age and q":        {FirstSeenBefore: ViewsBase.Add(20 * 24 * time.Hour), Q: "v1"},
		"nothing":          {States: []string{"no-such-state"}},
		"failed by":        {LastFailedBy: ViewsBase.Add(60 * time.Hour)},
		"failed by, state": {LastFailedBy: ViewsBase.Add(200 * time.Hour), States: []string{store.StatusPending, store.StatusResolved}},
		"failed by, glob":  {LastFailedBy: ViewsBase.Add(300 * time.Hour), Topics: []string{"tool.**"}},
	}
}

// SortedByLastFailure is what a sorted page must list, by a scan: the
// entries f matches, by last failure then stored ref (reversed for newest).
func SortedByLastFailure(all []*store.EntryRecord, f *store.EntryFilter, newest bool) []*store.EntryRecord {
	var want []*store.EntryRecord
	for _, r := range all {
		if f.Match(r) {
			want = append(want, r)
		}
	}
	slices.SortFunc(want, func(a, b *store.EntryRecord) int {
		c := store.LastFailure(a).Compare(store.LastFailure(b))
		if c == 0 {
			c = bytes.Compare(store.IKey(a.Entry.Ref()), store.IKey(b.Entry.Ref()))
		}
		if newest {
			c = -c
		}
		return c
	})
	return want
}
