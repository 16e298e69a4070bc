package server

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// The oracles below read every entry, record and request: what the
// console's views must list, which they read from the indexes.

// auditPageByScan is auditPage computed from the whole chain.
func auditPageByScan(ctx context.Context, s Store, aq auditQuery) ([]audit.Record, int, error) {
	return newestPage(func(fn func(audit.Record) error) error { return audit.Each(ctx, s, aq.Query, fn) }, aq)
}

// approvalQueueByScan is approvalQueue computed from every request.
func approvalQueueByScan(ctx context.Context, svc *approval.Service, s Store, state, group string, older time.Duration, now time.Time, page int) ([]approvalCard, int, error) {
	all, err := svc.List(ctx, approval.Filter{})
	if err != nil {
		return nil, 0, err
	}
	byEntry := map[string][]approval.View{}
	list := make([]approval.View, 0, len(all))
	for _, v := range all {
		byEntry[v.EntryRef] = append(byEntry[v.EntryRef], v)
		if (group == "" || v.ApproverGroup == group) && (state == "" || strings.EqualFold(v.State, state)) {
			list = append(list, v)
		}
	}
	return approvalCards(ctx, s, list, func(ref string) ([]approval.View, *store.EntryRecord, error) { return byEntry[ref], nil, nil }, older, now, page)
}

// viewsNow is the mixed console store's "now".
var viewsNow = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// mixedConsoleStore is a bbolt store with entries of every kind the
// console filters on (states, classes, sources, topics, labels, last
// failures hours to weeks old, some never failed), audit records by
// several actors and kinds over two weeks, and approval requests in every
// state, some pending past their expiry.
func mixedConsoleStore(t *testing.T) *bolt.Bolt {
	t.Helper()
	ctx := context.Background()
	now := viewsNow.Add(-30 * 24 * time.Hour)
	s, err := bolt.Open(filepath.Join(t.TempDir(), "replayctl.db"), store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	states := []string{store.StatusPending, store.StatusQuarantined, store.StatusReplayed, store.StatusAwaitingApproval, store.StatusResolved, store.StatusFailed}
	classes := []triage.Class{triage.Transient, triage.Poison, triage.Governance}
	topics := []string{"orders.created", "orders.paid.eu", "billing.invoice", "tool.email.send", "tool.alpha.send"}
	if err := s.Update(ctx, func(tx store.Tx) error {
		for i := range 180 {
			e := entry.Entry{ID: fmt.Sprintf("c%03d", i), Source: []string{"jsonl", "prodigy"}[i%2], Topic: topics[i%5],
				Message: fmt.Sprintf("failure %d", i), Payload: []byte(`{}`), Labels: map[string]string{"team": []string{"a", "b", "c"}[i%3]}}
			if i%6 != 0 {
				e.LastFailure = viewsNow.Add(-time.Duration((i*29)%600) * time.Hour)
			}
			r := &store.EntryRecord{Entry: e, Status: states[i%len(states)], Class: classes[i%3], Action: triage.AutoReplay,
				FirstSeen: viewsNow.Add(-time.Duration(600+i) * time.Hour)}
			if err := tx.PutEntry(r); err != nil {
				return err
			}
		}
		for i := range 200 {
			if _, err := tx.Append(&audit.Record{Kind: []string{audit.KindDecision, audit.KindOutcome, audit.KindResolve}[i%3],
				Actor: []string{"ops-bot", "alice", "bob", "carol"}[(i/3)%4], EntryRef: fmt.Sprintf("jsonl:c%03d", (i*2)%180),
				Time: viewsNow.Add(-14*24*time.Hour + time.Duration(i)*97*time.Minute)}); err != nil {
				return err
			}
		}
		for i := range 50 {
			st := []string{store.ApprovalPending, store.ApprovalApproved, store.ApprovalRejected, store.ApprovalExpired, store.ApprovalStale}[i%5]
			a := &store.Approval{ID: fmt.Sprintf("req%02d", i), EntryRef: fmt.Sprintf("jsonl:c%03d", i*2), ApproverGroup: []string{"oncall", "payments"}[i%2],
				State: st, RequestedAt: viewsNow.Add(-time.Duration(i*5) * time.Hour), ExpiresAt: viewsNow.Add(time.Duration(100-i*5) * time.Hour)}
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

// TestConsoleEntryFiltersIndexedEqualScan: every console filter that used
// to scan (sort=oldest|newest, several topic globs, an age, and their
// mixes with the other filters) lists from the indexes exactly what the
// scan lists, page by page, with the same total, and reads no entry
// outside its index ranges (Entries is refused).
func TestConsoleEntryFiltersIndexedEqualScan(t *testing.T) {
	ctx := context.Background()
	s := mixedConsoleStore(t)
	for _, raw := range []string{
		"sort=oldest", "sort=newest", "state=open&sort=oldest", "state=open&sort=newest",
		"class=poison&sort=newest", "state=quarantined,failed&source=prodigy&sort=oldest",
		"topic=orders.**,tool.*.send", "topic=orders.**,tool.*.send&state=open", "topic=billing.*,tool.alpha.*&sort=newest",
		"age=72h", "age=240h&state=open", "age=72h&class=transient&sort=oldest", "age=400h&sort=newest",
		"age=24h&topic=orders.*,tool.**&label=team%3Db", "q=failure+1&age=100h", "age=10000h",
	} {
		v, err := url.ParseQuery(raw)
		if err != nil {
			t.Fatal(err)
		}
		q := parseEntryQuery(v.Get)
		f, err := q.filter()
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		seen := 0
		for page := 1; page <= 20; page++ {
			want, err := scanPage(ctx, s, &f, viewsNow, q.Sort, page, 7)
			if err != nil {
				t.Fatal(err)
			}
			got, err := entryPage(ctx, noScanStore{s, t}, &f, viewsNow, q.Sort, page, 7)
			if err != nil {
				t.Fatalf("%s page %d: %v", raw, page, err)
			}
			if g, w := refsOfPage(got), refsOfPage(want); !slices.Equal(g, w) {
				t.Fatalf("%s page %d:\n got %v\nwant %v", raw, page, g, w)
			}
			if got.TotalExact && got.Total != want.Total || got.Total < want.Total {
				t.Fatalf("%s page %d: total %d (exact %v), the scan counts %d", raw, page, got.Total, got.TotalExact, want.Total)
			}
			seen += len(want.Items)
			if len(want.Items) == 0 {
				break
			}
		}
		if seen == 0 && raw != "age=10000h" {
			t.Fatalf("%s: the mixed store has no matching entry: the case proves nothing", raw)
		}
	}
}

func refsOfPage(p *replay.Page) []string {
	out := make([]string, 0, len(p.Items))
	for _, r := range p.Items {
		out = append(out, r.Entry.Ref())
	}
	return out
}

// TestConsoleAuditFiltersIndexedEqualScan: the audit page filtered by
// actor, kind and time lists from the audit indexes what a walk of the
// chain lists, page by page with the same total, and walks no record.
func TestConsoleAuditFiltersIndexedEqualScan(t *testing.T) {
	ctx := context.Background()
	s := mixedConsoleStore(t)
	for _, raw := range []string{"actor=alice", "kind=outcome", "since=2026-11-10T00:00", "until=2026-11-12T08:30",
		"since=2026-11-10T00:00&until=2026-11-15T00:00&actor=bob", "kind=resolve&actor=carol", "actor=nobody"} {
		v, _ := url.ParseQuery(raw)
		aq, err := parseAuditQuery(v)
		if err != nil {
			t.Fatal(err)
		}
		aq.Size = 9
		total := 0
		for page := 1; page <= 30; page++ {
			aq.Page = page
			want, wantN, err := auditPageByScan(ctx, s, aq)
			if err != nil {
				t.Fatal(err)
			}
			cr := &countingReader{Bolt: s}
			got, gotN, err := auditPage(ctx, cr, aq)
			if err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
			if cr.visited != 0 {
				t.Fatalf("%s page %d walked %d records of the chain", raw, page, cr.visited)
			}
			seqs := func(rs []audit.Record) (out []uint64) {
				for _, r := range rs {
					out = append(out, r.Seq)
				}
				return out
			}
			if gotN != wantN || !slices.Equal(seqs(got), seqs(want)) {
				t.Fatalf("%s page %d: %d %v, want %d %v", raw, page, gotN, seqs(got), wantN, seqs(want))
			}
			total = wantN
			if len(want) == 0 {
				break
			}
		}
		if total == 0 && raw != "actor=nobody" {
			t.Fatalf("%s: no record matches: the case proves nothing", raw)
		}
	}
}

// TestConsoleApprovalViewsIndexedEqualScan: the non-pending approvals
// views (approved, rejected, stale, expired including pending past their
// expiry, all) list from the index by state what the scan of every
// request lists, and read no other request (Approvals is refused).
func TestConsoleApprovalViewsIndexedEqualScan(t *testing.T) {
	ctx := context.Background()
	s := mixedConsoleStore(t)
	svc := &approval.Service{Store: s, Now: func() time.Time { return viewsNow }}
	noScanSvc := &approval.Service{Store: noScanStore{s, t}, Now: func() time.Time { return viewsNow }}
	for _, state := range []string{store.ApprovalApproved, store.ApprovalRejected, store.ApprovalStale, store.ApprovalExpired, ""} {
		for _, group := range []string{"", "payments"} {
			for page := 1; page <= 3; page++ {
				want, wantN, err := approvalQueueByScan(ctx, svc, s, state, group, 0, viewsNow, page)
				if err != nil {
					t.Fatal(err)
				}
				got, gotN, err := approvalQueue(ctx, noScanSvc, noScanStore{s, t}, state, group, 0, viewsNow, page)
				if err != nil {
					t.Fatal(err)
				}
				ids := func(cs []approvalCard) (out []string) {
					for _, c := range cs {
						out = append(out, c.ID+"/"+c.State)
					}
					return out
				}
				if gotN != wantN || !slices.Equal(ids(got), ids(want)) {
					t.Fatalf("state %q group %q page %d: %d %v, want %d %v", state, group, page, gotN, ids(got), wantN, ids(want))
				}
				if page == 1 && wantN == 0 {
					t.Fatalf("state %q group %q: no request: the case proves nothing", state, group)
				}
			}
		}
	}
}
