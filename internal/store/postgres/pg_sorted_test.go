package postgres

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/storetest"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// TestPostgresSortedPageMatchesBoltAndScan: on PostgreSQL, sort=oldest|
// newest pages (per-state ranges of entries_last_failed, merged) equal a
// full scan sorted by last failure then ref, and bbolt's SortedPage on the
// same entries, page by page (the same cursors), for every filter of the
// bbolt views tests (bolt_views_test.go: viewFilters), with the same
// totals. The statements they send reach entries only through an index
// condition.
func TestPostgresSortedPageMatchesBoltAndScan(t *testing.T) {
	ctx := context.Background()
	b := mixedViewsStore(t, filepath.Join(t.TempDir(), "replayctl.db"))
	defer b.Close()
	all := storetest.AllEntries(t, b)
	p := pgHolding(t, all)
	before := p.Trips()
	for name, f := range storetest.ViewFilters() {
		for _, newest := range []bool{false, true} {
			want := storetest.SortedByLastFailure(all, &f, newest)
			var got, fromBolt []string
			pc, bc := "", ""
			for range 100 {
				pp, err := p.SortedPage(ctx, f, newest, pc, 9)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				bp, err := b.SortedPage(ctx, f, newest, bc, 9)
				if err != nil {
					t.Fatalf("%s: bolt: %v", name, err)
				}
				got, fromBolt = append(got, storetest.RefsOf(pp.Items)...), append(fromBolt, storetest.RefsOf(bp.Items)...)
				if pp.Total != bp.Total || pp.TotalExact != bp.TotalExact || pp.Next != bp.Next {
					t.Fatalf("%s newest=%v: total %d exact %v next %q; bolt %d %v %q", name, newest, pp.Total, pp.TotalExact, pp.Next, bp.Total, bp.TotalExact, bp.Next)
				}
				if pc, bc = pp.Next, bp.Next; pc == "" {
					break
				}
			}
			if w := storetest.RefsOf(want); !slices.Equal(got, w) || !slices.Equal(fromBolt, w) {
				t.Fatalf("%s newest=%v:\n got %v\nbolt %v\nwant %v", name, newest, got, fromBolt, w)
			}
		}
	}
	after := p.Trips()
	var sent []string
	for sql, k := range after.ByStatement {
		if k > before.ByStatement[sql] {
			sent = append(sent, sql)
		}
	}
	assertIndexBounded(t, p, sent)
}

// TestPostgresPageTotalsFromCounters: a filtered page's total on
// PostgreSQL was a count(*) of every matching row (100 ms at 100k
// entries, 400x a bare SELECT of 20). It is now the counters' total, the
// same (and as exact) as bbolt's for every view filter but an age (a
// bound, as before), and no statement
// a page sends counts entries.
func TestPostgresPageTotalsFromCounters(t *testing.T) {
	ctx := context.Background()
	b := mixedViewsStore(t, filepath.Join(t.TempDir(), "replayctl.db"))
	defer b.Close()
	p := pgHolding(t, storetest.AllEntries(t, b))
	before := p.Trips()
	for name, f := range storetest.ViewFilters() {
		pp, err := p.Page(ctx, f, "", 9)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		bp, err := b.Page(ctx, f, "", 9)
		if err != nil {
			t.Fatalf("%s: bolt: %v", name, err)
		}
		// bbolt counts an age filter on its index (an exact total); here it
		// stays a bound, as it was.
		aged := !f.FirstSeenBefore.IsZero() || !f.LastFailedBy.IsZero()
		if aged && (pp.TotalExact || pp.Total < bp.Total) {
			t.Errorf("%s: total %d exact %v; bolt (exact) %d", name, pp.Total, pp.TotalExact, bp.Total)
		}
		if (!aged && (pp.Total != bp.Total || pp.TotalExact != bp.TotalExact)) || !slices.Equal(storetest.RefsOf(pp.Items), storetest.RefsOf(bp.Items)) {
			t.Errorf("%s: total %d exact %v %v; bolt %d %v %v", name, pp.Total, pp.TotalExact, storetest.RefsOf(pp.Items), bp.Total, bp.TotalExact, storetest.RefsOf(bp.Items))
		}
	}
	for sql, k := range p.Trips().ByStatement {
		if k > before.ByStatement[sql] && strings.Contains(sql, "count(") {
			t.Errorf("a page counted rows: %s", sql)
		}
	}
}

// pgHolding is a fresh PostgreSQL store holding recs, written in one
// transaction, with its sealer stopped so that Trips counts only what a
// test's reads send.
func pgHolding(t *testing.T, recs []*store.EntryRecord) *Postgres {
	t.Helper()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	if err := p.Update(context.Background(), func(tx store.Tx) error {
		for _, r := range recs {
			if err := tx.PutEntry(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p.stopSealer()
	p.stopSealer = nil
	return p
}
