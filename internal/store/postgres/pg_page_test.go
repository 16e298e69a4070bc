package postgres

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/store/storetest"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

// mixedViewsStore is storetest.MixedViews in a new bbolt file at path.
func mixedViewsStore(t *testing.T, path string) *bolt.Bolt {
	t.Helper()
	now := storetest.ViewsBase
	s, err := bolt.Open(path, store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	storetest.MixedViews(t, s, func(at time.Time) { now = at })
	return s
}

// TestPostgresPageWalksIndexRangesAndMatchesScan: a filtered page on
// PostgreSQL walks the index ranges of one dimension's values, merged
// in ref order by the statement, instead of evaluating every dimension's
// JSON on each row of the primary key (issue 16). Page by page, across
// cursors and statement batches (pages of 7, filters matching one entry
// in five), it returns exactly what a scan of every entry filtered with
// f.Match returns, in ref order, for every view filter and for values
// stored in several cases ("Poison", "POISON", "poison": one range of the
// index, which lowers them, but several values of the counters), and
// every statement it sends reaches entries only through an index
// condition.
func TestPostgresPageWalksIndexRangesAndMatchesScan(t *testing.T) {
	ctx := context.Background()
	b := mixedViewsStore(t, filepath.Join(t.TempDir(), "replayctl.db"))
	defer b.Close()
	all := storetest.AllEntries(t, b)
	cases := []triage.Class{"Poison", "POISON", "poison", triage.Transient}
	for i := range 60 {
		all = append(all, &store.EntryRecord{Entry: entry.Entry{ID: fmt.Sprintf("m%03d", i), Source: []string{"jsonl", "cordum"}[i%2],
			Topic: "orders.created", Payload: []byte(`{}`)}, Status: []string{store.StatusPending, "PENDING", store.StatusResolved}[i%3], Class: cases[i%4], Action: triage.AutoReplay})
	}
	p := pgHolding(t, all)
	filters := storetest.ViewFilters()
	maps.Copy(filters, map[string]store.EntryFilter{
		"class in any case":        {Classes: []string{"poison"}},
		"state in any case, class": {States: []string{"pending"}, Classes: []string{"POISON", "transient"}},
		"states and class":         {States: []string{store.StatusPending, store.StatusQuarantined, store.StatusResolved}, Classes: []string{string(triage.Transient)}},
		"source and class":         {Sources: []string{"CORDUM"}, Classes: []string{"poison"}},
		"action and topic":         {Actions: []string{string(triage.AutoReplay)}, Topic: "orders.*"},
	})
	before := p.Trips()
	for name, f := range filters {
		var want []string
		for _, r := range all {
			if f.Match(r) {
				want = append(want, r.Entry.Ref())
			}
		}
		slices.Sort(want)
		if name != "nothing" && (len(want) == 0 || len(want) == len(all) && name != "all") {
			t.Fatalf("%s: %d of %d entries match: the case proves nothing", name, len(want), len(all))
		}
		var got []string
		cursor := ""
		for range 200 {
			pg, err := p.Page(ctx, f, cursor, 7)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got = append(got, storetest.RefsOf(pg.Items)...)
			if cursor = pg.Next; cursor == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", name, got, want)
		}
	}
	var sent []string
	for sql, k := range p.Trips().ByStatement {
		if k > before.ByStatement[sql] {
			sent = append(sent, sql)
		}
	}
	if !slices.ContainsFunc(sent, func(s string) bool { return strings.Contains(strings.ToLower(s), "union all") }) {
		t.Errorf("no page merged index ranges: %v", sent)
	}
	assertIndexBounded(t, p, sent)
}

// TestPostgresPageWithASourceWalksOnlyThatSourcesRefs: a ref begins with its
// source, so the range of any other dimension holds, in ref order, the
// other sources' entries before the ones asked for: a page of topic and
// source walking the primary key (before issue 16) or the topic's range
// passed every cordum entry of the topic before the first nexora one (a
// walk growing with the store: 6.4 s a page at 1M entries before, 1.8 s
// on the topic's ranges). Each range is now cut to the source's span of
// refs: here one statement besides the counters', whose first rows are
// the page.
func TestPostgresPageWithASourceWalksOnlyThatSourcesRefs(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	var recs []*store.EntryRecord
	add := func(source, id, topic string) {
		recs = append(recs, &store.EntryRecord{Entry: entry.Entry{ID: id, Source: source, Topic: topic, Payload: []byte(`{}`)},
			Status: store.StatusPending, Class: triage.Transient, Action: triage.AutoReplay})
	}
	// The topic holds fewer entries than the source: the narrowest range.
	for i := range 300 {
		add("cordum", fmt.Sprintf("c%03d", i), "orders.a")
	}
	for i := range 30 {
		add("nexora", fmt.Sprintf("a%03d", i), "orders.a")
	}
	for i := range 400 {
		add("nexora", fmt.Sprintf("b%03d", i), "orders.b")
	}
	if _, err := p.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	p.stopSealer()
	p.stopSealer = nil
	before := p.Trips().Statements
	pg, err := p.Page(ctx, store.EntryFilter{Topic: "orders.a", Sources: []string{"NEXORA"}}, "", 20)
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Trips().Statements - before; n != 2 {
		t.Errorf("a page sent %d statements, want the counters' and one walk", n)
	}
	if got := storetest.RefsOf(pg.Items); len(got) != 20 || got[0] != "nexora:a000" || got[19] != "nexora:a019" {
		t.Errorf("page %v", got)
	}
}

// TestPostgresPageOfAGlobOfManyTopicsMergesFewRanges: a topic glob can
// match thousands of topics, and a statement merging a range per topic
// (times the sources cutting them) grows with them; past maxRanges the
// page walks the next narrowest dimension, here the states, and returns
// what a scan returns.
func TestPostgresPageOfAGlobOfManyTopicsMergesFewRanges(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	var recs []*store.EntryRecord
	for i := range 400 {
		recs = append(recs, &store.EntryRecord{Entry: entry.Entry{ID: fmt.Sprintf("e%03d", i), Source: []string{"jsonl", "cordum"}[i%2],
			Topic: fmt.Sprintf("t.%03d", i%(2*maxRanges)), Payload: []byte(`{}`)},
			Status: []string{store.StatusPending, store.StatusResolved, store.StatusReplayed}[i%3], Class: triage.Transient, Action: triage.AutoReplay})
	}
	// More pending jsonl entries than the glob's: the glob is the
	// narrowest dimension of the first two filters.
	for i := range 500 {
		recs = append(recs, &store.EntryRecord{Entry: entry.Entry{ID: fmt.Sprintf("z%03d", i), Source: "jsonl", Topic: "z.other", Payload: []byte(`{}`)},
			Status: store.StatusPending, Class: triage.Transient, Action: triage.AutoReplay})
	}
	if _, err := p.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	p.stopSealer()
	p.stopSealer = nil
	for _, f := range []store.EntryFilter{
		{Topic: "t.*", States: []string{store.StatusPending}},
		{Topic: "t.*", Sources: []string{"jsonl"}},
		{Topic: "t.0[0-3]*"},
	} {
		var want []string
		for _, r := range recs {
			if f.Match(r) {
				want = append(want, r.Entry.Ref())
			}
		}
		slices.Sort(want)
		before := p.Trips()
		var got []string
		cursor := ""
		for range 100 {
			pg, err := p.Page(ctx, f, cursor, 25)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, storetest.RefsOf(pg.Items)...)
			if cursor = pg.Next; cursor == "" {
				break
			}
		}
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%+v:\n got %v\nwant %v", f, got, want)
		}
		for sql, k := range p.Trips().ByStatement {
			if k > before.ByStatement[sql] && strings.Count(strings.ToLower(sql), "union all")+1 > maxRanges {
				t.Errorf("%+v: a statement merges %d ranges", f, strings.Count(strings.ToLower(sql), "union all")+1)
			}
		}
	}
}
