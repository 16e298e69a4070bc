package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// indexFixture stores a spread of entries over every indexed dimension.
// The shapes follow the DLQ records the connectors read (see each
// connector/<system> package doc): job entries carrying a topic and a
// reason code, records with a topic and labels, items with an error
// signature. The source kinds are any three names.
func indexFixture(t *testing.T, s store.Backend, base time.Time) []*store.EntryRecord {
	t.Helper()
	states := []string{store.StatusPending, store.StatusAwaitingApproval, store.StatusReplayed, store.StatusQuarantined, store.StatusResolved}
	classes := []triage.Class{triage.Transient, triage.Poison, ""}
	sources := []string{"sys-a", "sys-b", "jsonl"}
	topics := []string{"orders.eu", "orders.us", "payments", ""}
	var recs []*store.EntryRecord
	for i := 0; i < 40; i++ {
		e := entry.Entry{ID: fmt.Sprintf("e%02d", i), Source: sources[i%3], Topic: topics[i%4],
			IdempotencyKey: fmt.Sprintf("key-%d", i), ReasonCode: "TIMEOUT", Message: fmt.Sprintf("upstream timeout after %d ms", 100+i),
			Payload: []byte(fmt.Sprintf(`{"n": %d}`, i))}
		if i%5 == 0 {
			e.Labels = map[string]string{"team": "billing"}
		}
		if i%7 == 0 {
			e.State.ErrorSignature = "db-locked"
		}
		r := &store.EntryRecord{Entry: e, Status: states[i%5], Class: classes[i%3], Action: triage.AutoReplay,
			FirstSeen: base.Add(time.Duration(i) * 37 * time.Minute), LastSeen: base}
		if i%4 == 1 {
			r.Action = triage.Quarantine
		}
		recs = append(recs, r)
	}
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		for _, r := range recs {
			if err := tx.PutEntry(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

// pageAll reads every page of f with a small limit, following cursors.
func pageAll(t *testing.T, s store.Backend, f store.EntryFilter, limit int) ([]string, *store.EntryPage) {
	t.Helper()
	var refs []string
	var first *store.EntryPage
	cursor := ""
	for i := 0; ; i++ {
		p, err := s.Page(context.Background(), f, cursor, limit)
		if err != nil {
			t.Fatalf("page %+v: %v", f, err)
		}
		if first == nil {
			first = p
		}
		if len(p.Items) > limit {
			t.Fatalf("page of %d items with limit %d", len(p.Items), limit)
		}
		for _, it := range p.Items {
			if it.Entry.Payload != nil {
				t.Fatalf("page item %s carries its payload: a listing must not read payloads", it.Entry.Ref())
			}
			refs = append(refs, it.Entry.Ref())
		}
		if p.Next == "" {
			return refs, first
		}
		if i > 100 {
			t.Fatal("cursor never ends")
		}
		cursor = p.Next
	}
}

func pageMatchesScan(t *testing.T, s store.Backend) {
	ctx := context.Background()
	base := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	indexFixture(t, s, base)
	filters := []store.EntryFilter{
		{},
		{States: []string{store.StatusPending, store.StatusQuarantined}},
		{States: []string{"PENDING"}, Classes: []string{"transient"}},
		{Actions: []string{string(triage.Quarantine)}, Sources: []string{"sys-b"}},
		{Topic: "orders.*"},
		{Topic: "*"},
		{Topic: "**"},
		{Topic: "orders.*", States: []string{store.StatusReplayed}},
		{Topic: "payments"},
		{Labels: map[string]string{"team": "billing"}},
		{Q: "E1"},
		{Q: "key-3", States: []string{store.StatusAwaitingApproval, store.StatusReplayed}},
		{FirstSeenBefore: base.Add(10 * time.Hour)},
		{States: []string{"no-such-state"}},
		{Classes: []string{""}},
	}
	for _, f := range filters {
		var want []string
		if err := s.Entries(ctx, func(r *store.EntryRecord) error {
			if f.Match(r) {
				want = append(want, r.Entry.Ref())
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		sort.Strings(want)
		for _, limit := range []int{3, 20} {
			got, first := pageAll(t, s, f, limit)
			if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("filter %+v limit %d:\n got %v\nwant %v", f, limit, got, want)
			}
			if first.TotalExact && first.Total != int64(len(want)) {
				t.Errorf("filter %+v: exact total %d, want %d", f, first.Total, len(want))
			}
			if !first.TotalExact && first.Total < int64(len(want)) {
				t.Errorf("filter %+v: total bound %d below %d matches", f, first.Total, len(want))
			}
		}
	}
	if _, err := s.Page(ctx, store.EntryFilter{}, "%%%not-a-cursor", 5); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("a malformed cursor: %v, want ErrBadCursor", err)
	}
	if _, err := s.Page(ctx, store.EntryFilter{Topic: "orders.[a"}, "", 5); !errors.Is(err, store.ErrBadFilter) {
		t.Errorf("a malformed topic glob: %v, want ErrBadFilter", err)
	}
}

// countersFromScan computes what Counters must say by reading everything.
func countersFromScan(t *testing.T, s store.Backend) (cells map[store.Cell]int64, open map[store.Depth]int64, topics, days map[string]int64, sigs map[string]int64, oldest time.Time) {
	cells, open, topics, days, sigs = map[store.Cell]int64{}, map[store.Depth]int64{}, map[string]int64{}, map[string]int64{}, map[string]int64{}
	if err := s.Entries(context.Background(), func(r *store.EntryRecord) error {
		cells[store.Cell{Source: r.Entry.Source, Class: string(r.Class), Action: string(r.Action), State: r.Status}]++
		topics[r.Entry.Topic]++
		days[r.FirstSeen.UTC().Format("2006-01-02")]++
		sigs[store.Signature(r)]++
		if store.IsOpen(r.Status) {
			open[store.Depth{Source: r.Entry.Source, Topic: r.Entry.Topic}]++
			if lf := store.LastFailure(r); !lf.IsZero() && (oldest.IsZero() || lf.Before(oldest)) {
				oldest = lf
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return
}

func checkCounters(t *testing.T, s store.Backend, wantDecisions, wantDenied int64) {
	t.Helper()
	c, err := s.Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cells, open, topics, days, sigs, oldest := countersFromScan(t, s)
	gotCells := map[store.Cell]int64{}
	var n int64
	for _, cl := range c.Cells {
		gotCells[store.Cell{Source: cl.Source, Class: cl.Class, Action: cl.Action, State: cl.State}] = cl.N
		n += cl.N
	}
	gotOpen := map[store.Depth]int64{}
	for _, d := range c.Open {
		gotOpen[store.Depth{Source: d.Source, Topic: d.Topic}] = d.N
	}
	gotSigs := map[string]int64{}
	for _, sc := range c.Signatures {
		gotSigs[sc.Signature] = sc.N
	}
	switch {
	case !reflect.DeepEqual(gotCells, cells):
		t.Errorf("cells\n got %v\nwant %v", gotCells, cells)
	case c.Entries != n:
		t.Errorf("entries %d, cells sum to %d", c.Entries, n)
	case !reflect.DeepEqual(gotOpen, open):
		t.Errorf("open depth\n got %v\nwant %v", gotOpen, open)
	case !reflect.DeepEqual(c.Topics, topics):
		t.Errorf("topics\n got %v\nwant %v", c.Topics, topics)
	case !reflect.DeepEqual(c.Days, days):
		t.Errorf("days\n got %v\nwant %v", c.Days, days)
	case !reflect.DeepEqual(gotSigs, sigs):
		t.Errorf("signatures\n got %v\nwant %v", gotSigs, sigs)
	case !c.OldestOpen.Equal(oldest):
		t.Errorf("oldest open %v, want %v", c.OldestOpen, oldest)
	case c.Decisions != wantDecisions || c.Denied != wantDenied:
		t.Errorf("decisions %d denied %d, want %d %d", c.Decisions, c.Denied, wantDecisions, wantDenied)
	}
}

// countersFollowWrites: every write moves the counters in its own
// transaction, and a rolled-back write moves nothing.
func countersFollowWrites(t *testing.T, s store.Backend) {
	ctx := context.Background()
	base := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	recs := indexFixture(t, s, base)
	checkCounters(t, s, 0, 0)

	// Status, class and topic changes, and the oldest open entry draining.
	if err := s.Update(ctx, func(tx store.Tx) error {
		for _, i := range []int{0, 3, 11} {
			r, err := tx.Entry(recs[i].Entry.Ref())
			if err != nil {
				return err
			}
			r.Status, r.Class, r.Entry.Topic = store.StatusReplayed, triage.Poison, "moved"
			if err := tx.PutEntry(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, s, 0, 0)
	_ = s.Update(ctx, func(tx store.Tx) error {
		r, _ := tx.Entry(recs[1].Entry.Ref())
		r.Status = store.StatusFailed
		if err := tx.PutEntry(r); err != nil {
			return err
		}
		return fmt.Errorf("roll back")
	})
	checkCounters(t, s, 0, 0)

	// Decisions: proposed replays, denied ones, skips (not counted) and
	// outcomes, as the denial-rate metric counts them.
	recsA := []audit.Record{
		{Kind: audit.KindDecision, Decision: &triage.Decision{ProposedAction: triage.AutoReplay}, Action: triage.AutoReplay},
		{Kind: audit.KindDecision, Decision: &triage.Decision{ProposedAction: triage.AutoReplay}, Action: triage.RequireApproval},
		{Kind: audit.KindDecision, Decision: &triage.Decision{ProposedAction: triage.AutoReplay}, Action: triage.Skip},
		{Kind: audit.KindDecision, Decision: &triage.Decision{ProposedAction: triage.Quarantine}, Action: triage.Quarantine},
		{Kind: audit.KindOutcome, Outcome: "succeeded"},
		{Kind: audit.KindOutcome, Outcome: "succeeded"},
		{Kind: audit.KindOutcome, Outcome: "failed"},
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		for i := range recsA {
			r := recsA[i]
			r.Time = base.Add(90 * time.Minute)
			if _, err := tx.Append(&r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, s, 2, 1)
	c, err := s.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Outcomes["succeeded"] != 2 || c.Outcomes["failed"] != 1 {
		t.Errorf("outcomes %v", c.Outcomes)
	}
	series, err := s.Series(ctx, base, base.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var inflow, decisions, denied int64
	for _, h := range series {
		if h.Hour.Before(base) || h.Hour.After(base.Add(2*time.Hour)) {
			t.Errorf("hour %v outside the range", h.Hour)
		}
		inflow += h.Inflow
		decisions += h.Decisions
		denied += h.Denied
		if h.Hour.Equal(base.Add(time.Hour)) && h.Outcomes["succeeded"] != 2 {
			t.Errorf("hour %v outcomes %v", h.Hour, h.Outcomes)
		}
	}
	// Entries i first seen at base + i*37min: i = 0..4 fall in the first
	// hours 10:00 to 12:59 (0, 37, 74, 111, 148 min).
	if inflow != 5 || decisions != 2 || denied != 1 {
		t.Errorf("series inflow %d decisions %d denied %d, want 5 2 1: %+v", inflow, decisions, denied, series)
	}
}
