package storetest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// The contract's views, each compared with what a scan of the whole store
// says: every backend must list exactly the scan's answer, in the same
// order, or the console shows one thing on bbolt and another on
// PostgreSQL.

// sortedFixture is indexFixture with last failures: distinct, equal
// (ties, broken by ref) and absent (the first-seen time counts).
func sortedFixture(t *testing.T, s store.Backend, base time.Time) {
	t.Helper()
	recs := indexFixture(t, s, base)
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		for i, r := range recs {
			switch {
			case i%6 == 0:
				r.Entry.LastFailure = base.Add(90 * time.Minute) // a tie of seven
			case i%3 == 1:
				r.Entry.LastFailure = base.Add(time.Duration(40-i) * 11 * time.Minute)
			}
			if err := tx.PutEntry(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// sortedPages: SortedPage lists what the scan sorted by last failure
// lists (ties by ref; newest: the reverse), page after page through its
// cursors, under every filter, without payloads.
func sortedPages(t *testing.T, s store.Backend) {
	ctx := context.Background()
	base := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	sortedFixture(t, s, base)
	filters := []store.EntryFilter{
		{},
		{States: []string{store.StatusPending, store.StatusQuarantined}},
		{States: []string{"REPLAYED"}, Classes: []string{"poison"}},
		{Topic: "orders.*"},
		{Topics: []string{"payments", "orders.us"}},
		{Labels: map[string]string{"team": "billing"}},
		{Q: "timeout after 11"},
		{LastFailedBy: base.Add(3 * time.Hour)},
		{FirstSeenBefore: base.Add(8 * time.Hour), States: []string{store.StatusResolved, store.StatusPending}},
		{States: []string{"no-such-state"}},
	}
	for _, f := range filters {
		var all []*store.EntryRecord
		if err := s.Entries(ctx, func(r *store.EntryRecord) error {
			if f.Match(r) {
				all = append(all, r)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(all, func(a, b *store.EntryRecord) int {
			return cmp.Or(store.LastFailure(a).Compare(store.LastFailure(b)), strings.Compare(a.Entry.Ref(), b.Entry.Ref()))
		})
		want := make([]string, len(all))
		for i, r := range all {
			want[i] = r.Entry.Ref()
		}
		for _, newest := range []bool{false, true} {
			if newest {
				slices.Reverse(want)
			}
			for _, limit := range []int{4, 50} {
				var got []string
				cursor := ""
				for i := 0; ; i++ {
					p, err := s.SortedPage(ctx, f, newest, cursor, limit)
					if err != nil {
						t.Fatalf("filter %+v newest %v: %v", f, newest, err)
					}
					if len(p.Items) > limit {
						t.Fatalf("page of %d with limit %d", len(p.Items), limit)
					}
					for _, it := range p.Items {
						if it.Entry.Payload != nil {
							t.Fatalf("sorted page item %s carries its payload", it.Entry.Ref())
						}
						got = append(got, it.Entry.Ref())
					}
					if p.Next == "" || i > 100 {
						break
					}
					cursor = p.Next
				}
				if !slices.Equal(got, want) {
					t.Errorf("filter %+v newest %v limit %d:\n got %v\nwant %v", f, newest, limit, got, want)
				}
			}
		}
	}
	if _, err := s.SortedPage(ctx, store.EntryFilter{}, false, "%%%not-a-cursor", 5); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("a malformed cursor: %v, want ErrBadCursor", err)
	}
}

// auditFixture appends records by several actors and kinds over two days,
// some at the same instant and some a nanosecond apart (bbolt's time
// index keeps nanoseconds, PostgreSQL's timestamptz microseconds), about
// a few entries and keys. It returns the boundary instant.
func auditFixture(t *testing.T, s store.Backend, base time.Time) time.Time {
	t.Helper()
	edge := base.Add(10 * time.Hour).Add(123456789 * time.Nanosecond)
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		for i := range 60 {
			at := base.Add(time.Duration(i) * 47 * time.Minute)
			switch i {
			case 20, 21:
				at = edge
			case 22:
				at = edge.Add(time.Nanosecond)
			case 19:
				at = edge.Add(-time.Nanosecond)
			}
			r := &audit.Record{Time: at, Actor: []string{"ops-bot", "alice", "bob", "Alice"}[i%4],
				Kind: []string{audit.KindDecision, audit.KindOutcome, audit.KindResolve}[i%3], EntryRef: fmt.Sprintf("jsonl:a%d", i%7)}
			if i%9 == 0 {
				r.EntryRef, r.Key = "", fmt.Sprintf("key-a%d", i%7) // about a key alone
			}
			if _, err := tx.Append(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return edge
}

// scanAudit is every readable record of the chain, in order.
func scanAudit(t *testing.T, s store.Backend) []audit.Record {
	t.Helper()
	var out []audit.Record
	if err := s.AuditRange(context.Background(), 1, func(_ uint64, sealed audit.Sealed, derr error) error {
		if derr != nil {
			return derr
		}
		rec, err := sealed.Open()
		if err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// auditRanges: AuditSeqs selects what a scan of the chain selects (actor
// and kind exactly, the time range inclusive to the nanosecond), oldest
// first; AuditRecords reads back the seqs given, in their order, skipping
// one not stored; AuditRangeRaw hands out the records AuditRange reads;
// EntryAudit is the scan's history of the entry.
func auditRanges(t *testing.T, s store.Backend) {
	ctx := context.Background()
	base := time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC)
	edge := auditFixture(t, s, base)
	chain := scanAudit(t, s)
	if len(chain) != 60 {
		t.Fatalf("%d records, want 60", len(chain))
	}
	filters := []store.AuditFilter{
		{Actor: "alice"}, {Actor: "Alice"}, {Actor: "nobody"}, {Kind: audit.KindOutcome},
		{Actor: "bob", Kind: audit.KindDecision},
		{Since: edge}, {Until: edge}, {Since: edge, Until: edge}, {Since: edge.Add(time.Nanosecond)},
		{Since: base.Add(5 * time.Hour), Until: base.Add(30 * time.Hour), Actor: "ops-bot"},
		{Since: edge.Add(-time.Nanosecond), Until: edge, Kind: audit.KindResolve},
	}
	for _, f := range filters {
		var want []uint64
		for _, r := range chain {
			if (f.Actor == "" || r.Actor == f.Actor) && (f.Kind == "" || r.Kind == f.Kind) &&
				(f.Since.IsZero() || !r.Time.Before(f.Since)) && (f.Until.IsZero() || !r.Time.After(f.Until)) {
				want = append(want, r.Seq)
			}
		}
		got, err := s.AuditSeqs(ctx, f)
		if err != nil {
			t.Fatalf("audit seqs %+v: %v", f, err)
		}
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("audit seqs %+v:\n got %v\nwant %v", f, got, want)
		}
	}
	if _, err := s.AuditSeqs(ctx, store.AuditFilter{}); err == nil {
		t.Error("AuditSeqs without a filter: no error (it would list the whole chain)")
	}
	// AuditRecords: the order given, a seq not stored skipped.
	ask := []uint64{42, 7, 9999, 7, 1}
	var got []uint64
	if err := s.AuditRecords(ctx, ask, func(seq uint64, sealed audit.Sealed, derr error) error {
		if derr != nil || sealed.Seq != seq {
			return fmt.Errorf("record %d: %+v %v", seq, sealed, derr)
		}
		rec, err := sealed.Open()
		if err != nil || !reflect.DeepEqual(rec, chain[seq-1]) {
			return fmt.Errorf("record %d: %+v, the chain has %+v (%v)", seq, rec, chain[seq-1], err)
		}
		got = append(got, seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []uint64{42, 7, 7, 1}) {
		t.Errorf("audit records of %v: %v", ask, got)
	}
	// AuditRangeRaw: DecodeValue reads each into what AuditRange reads.
	var raw []audit.Sealed
	if err := s.AuditRangeRaw(ctx, 31, func(seq uint64, b []byte) error {
		var sealed audit.Sealed
		if err := store.DecodeValue(b, &sealed); err != nil || sealed.Seq != seq {
			return fmt.Errorf("raw record %d: %v", seq, err)
		}
		raw = append(raw, sealed)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var sealed []audit.Sealed
	if err := s.AuditRange(ctx, 31, func(_ uint64, s audit.Sealed, _ error) error { sealed = append(sealed, s); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(raw) != 30 || len(raw) != len(sealed) {
		t.Fatalf("raw range from 31: %d records, AuditRange %d", len(raw), len(sealed))
	}
	for i := range raw {
		if raw[i].Seq != sealed[i].Seq || raw[i].Hash != sealed[i].Hash || raw[i].Prev != sealed[i].Prev || !bytes.Equal(raw[i].Body, sealed[i].Body) {
			t.Fatalf("raw record %d differs: %+v, AuditRange %+v", raw[i].Seq, raw[i], sealed[i])
		}
	}
	// EntryAudit: the records naming the ref, and those naming only its key.
	for _, c := range []struct{ ref, key string }{{"jsonl:a3", "key-a3"}, {"jsonl:a0", ""}, {"jsonl:none", "key-a2"}} {
		var want, got []uint64
		for _, r := range chain {
			if r.EntryRef == c.ref || r.EntryRef == "" && c.key != "" && r.Key == c.key {
				want = append(want, r.Seq)
			}
		}
		if err := s.EntryAudit(ctx, c.ref, c.key, func(seq uint64, _ audit.Sealed, derr error) error {
			got = append(got, seq)
			return derr
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("history of %s/%s: %v, want %v", c.ref, c.key, got, want)
		}
	}
}

// chainReaders: what audit verify reads besides the records agrees with
// them: the signed head is the head, nothing is left unsealed once read,
// no record after the head is forged, and an unpruned chain has no base.
func chainReaders(t *testing.T, s store.Backend) {
	ctx := context.Background()
	auditFixture(t, s, time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC))
	chain := scanAudit(t, s) // seals what was written, where a store seals
	seq, hash, err := s.AuditHead(ctx)
	if err != nil || seq != uint64(len(chain)) {
		t.Fatalf("head %d %v, the chain has %d", seq, err, len(chain))
	}
	mac, err := s.AuditHeadMAC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sseq, shash, smac, err := s.AuditSignedHead(ctx)
	if err != nil || sseq != seq || shash != hash || smac != mac {
		t.Fatalf("signed head %d %s %q %v; head %d %s %q", sseq, shash, smac, err, seq, hash, mac)
	}
	if n, err := s.AuditUnsealed(ctx); err != nil || n != 0 {
		t.Fatalf("unsealed %d %v after reading the chain", n, err)
	}
	if seq, err := s.AuditTailForged(ctx, []byte("key")); err != nil || seq != 0 {
		t.Fatalf("forged %d %v", seq, err)
	}
	if b, err := s.AuditBase(ctx); err != nil || b != nil {
		t.Fatalf("base %+v %v of a chain never pruned", b, err)
	}
	res, err := audit.Verify(ctx, s, nil)
	if err != nil || !res.OK() || res.Records != len(chain) {
		t.Fatalf("verify %+v %v", res, err)
	}
	if s.AuditTamperRefusals() != 0 {
		t.Fatalf("%d tamper refusals on an intact chain", s.AuditTamperRefusals())
	}
}

// approvalFixture stores requests in every state, some pending past their
// expiry, requested at distinct and equal times, for entries of the
// index fixture.
func approvalFixture(t *testing.T, s store.Backend, base time.Time) {
	t.Helper()
	states := []string{store.ApprovalPending, store.ApprovalApproved, store.ApprovalRejected, store.ApprovalExpired, store.ApprovalStale}
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		for i := range 30 {
			at := base.Add(time.Duration(i*7%30) * time.Hour)
			if i%8 == 0 {
				at = base // ties, broken by id
			}
			a := &store.Approval{ID: fmt.Sprintf("apr-%02d", 29-i), EntryRef: fmt.Sprintf("jsonl:e%02d", i), EntryID: fmt.Sprintf("e%02d", i),
				State: states[i%5], ApproverGroup: []string{"oncall", "payments"}[i%2], RequestedAt: at, ExpiresAt: at.Add(48 * time.Hour)}
			if err := tx.PutApproval(a); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// approvalIndexes: PendingApprovals lists the stored pending requests
// oldest first (ties by id); ApprovalsByState lists the requests of the
// states asked (any case; none: all) by state, oldest first within one;
// both as a scan of every request finds them.
func approvalIndexes(t *testing.T, s store.Backend) {
	ctx := context.Background()
	base := time.Date(2026, 11, 4, 0, 0, 0, 0, time.UTC)
	approvalFixture(t, s, base)
	var all []*store.Approval
	if err := s.Approvals(ctx, func(a *store.Approval) error { all = append(all, a); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(all) != 30 || !slices.IsSortedFunc(all, func(a, b *store.Approval) int { return strings.Compare(a.ID, b.ID) }) {
		t.Fatalf("Approvals: %d, not in id order", len(all))
	}
	byTime := func(a, b *store.Approval) int {
		return cmp.Or(a.RequestedAt.Compare(b.RequestedAt), strings.Compare(a.ID, b.ID))
	}
	ids := func(list []*store.Approval) []string {
		out := make([]string, len(list))
		for i, a := range list {
			out[i] = a.ID
		}
		return out
	}
	collect := func(read func(fn func(*store.Approval) error) error) []string {
		var out []*store.Approval
		if err := read(func(a *store.Approval) error { out = append(out, a); return nil }); err != nil {
			t.Fatal(err)
		}
		return ids(out)
	}
	var pending []*store.Approval
	for _, a := range all {
		if a.State == store.ApprovalPending {
			pending = append(pending, a)
		}
	}
	slices.SortFunc(pending, byTime)
	if got := collect(func(fn func(*store.Approval) error) error { return s.PendingApprovals(ctx, fn) }); !slices.Equal(got, ids(pending)) {
		t.Errorf("pending approvals:\n got %v\nwant %v", got, ids(pending))
	}
	for _, states := range [][]string{{store.ApprovalApproved}, {"REJECTED", "stale"}, {store.ApprovalExpired, store.ApprovalPending}, nil} {
		var want []*store.Approval
		for _, a := range all {
			if len(states) == 0 || slices.ContainsFunc(states, func(st string) bool { return strings.EqualFold(st, a.State) }) {
				want = append(want, a)
			}
		}
		// Grouped by state (in the order of the state's index key: its
		// length, then its bytes), oldest first within one.
		slices.SortFunc(want, func(a, b *store.Approval) int {
			return cmp.Or(cmp.Compare(len(a.State), len(b.State)), strings.Compare(a.State, b.State), byTime(a, b))
		})
		got := collect(func(fn func(*store.Approval) error) error { return s.ApprovalsByState(ctx, states, fn) })
		if !slices.Equal(got, ids(want)) {
			t.Errorf("approvals by state %v:\n got %v\nwant %v", states, got, ids(want))
		}
	}
}

// idsAndGauges: RefsByID finds every entry with a source id (two sources
// sharing one, one scoped) in ref order; Gauges agree with Counters.
func idsAndGauges(t *testing.T, s store.Backend) {
	ctx := context.Background()
	indexFixture(t, s, time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC))
	if err := s.Update(ctx, func(tx store.Tx) error {
		for _, e := range []entry.Entry{
			{ID: "e07", Source: "sys-a", Scope: "job-9", IdempotencyKey: "k-p7"},
			{ID: "e07", Source: "sys-b", IdempotencyKey: "k-r7"},
			{ID: "50%_off", Source: "jsonl", IdempotencyKey: "k-odd"},
			{ID: "x50%_off", Source: "jsonl", IdempotencyKey: "k-odd2"},
		} {
			if err := tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusPending, Class: triage.Transient}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"e07", "e13", "50%_off", "_off", "nope"} {
		var want []string
		if err := s.Entries(ctx, func(r *store.EntryRecord) error {
			if r.Entry.ID == id {
				want = append(want, r.Entry.Ref())
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(want)
		got, err := s.RefsByID(ctx, id)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("refs of id %q: %v %v, want %v", id, got, err, want)
		}
	}
	g, err := s.Gauges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sortCells := func(cs []store.Cell) []store.Cell {
		out := slices.Clone(cs)
		slices.SortFunc(out, func(a, b store.Cell) int {
			return cmp.Or(strings.Compare(a.Source, b.Source), strings.Compare(a.Class, b.Class), strings.Compare(a.Action, b.Action), strings.Compare(a.State, b.State))
		})
		return out
	}
	sortDepth := func(ds []store.Depth) []store.Depth {
		out := slices.Clone(ds)
		slices.SortFunc(out, func(a, b store.Depth) int {
			return cmp.Or(strings.Compare(a.Source, b.Source), strings.Compare(a.Topic, b.Topic))
		})
		return out
	}
	if !reflect.DeepEqual(sortCells(g.Cells), sortCells(c.Cells)) || !reflect.DeepEqual(sortDepth(g.Open), sortDepth(c.Open)) || !g.OldestOpen.Equal(c.OldestOpen) {
		t.Errorf("gauges %+v, counters say cells %v open %v oldest %v", g, c.Cells, c.Open, c.OldestOpen)
	}
}
