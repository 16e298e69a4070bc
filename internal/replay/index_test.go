package replay

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// noScan is the real store with its whole-store reads refused: a listing,
// stats or lookup that still scans fails (issue 16: every read scanned).
type noScan struct {
	*bolt.Bolt
	t *testing.T
}

var errScanned = errors.New("read the whole store")

func (n noScan) Entries(context.Context, func(*store.EntryRecord) error) error {
	n.t.Error("Entries called: this read must come from the indexes")
	return errScanned
}

func (n noScan) AuditRange(context.Context, uint64, func(uint64, audit.Sealed, error) error) error {
	n.t.Error("AuditRange called: this read must come from the counters")
	return errScanned
}

func statsBundle(t *testing.T) *testBundle {
	b := newBundle(t, baseRules)
	src := b.jsonl("dlq.jsonl",
		transient("e1", "k1"),
		transient("e2", "k2"),
		highRisk("h1", "k3"),
		map[string]any{"id": "p1", "topic": "orders.eu", "reason_code": "schema_invalid", "message": "field 12 invalid", "idempotency_key": "p1", "labels": map[string]string{"team": "billing"}},
		map[string]any{"id": "p2", "topic": "orders.us", "reason_code": "schema_invalid", "message": "field 99 invalid", "idempotency_key": "p2"},
	)
	b.run(b.reconciler(1), src)
	b.clock.Sleep(context.Background(), 90*time.Minute)
	if err := b.approve(t, "jsonl:h1", "alice"); err != nil {
		t.Fatal(err)
	}
	return b
}

// scanStats is the oracle: the stats computed by reading every entry and
// the whole audit chain.
func scanStats(ctx context.Context, s Reporter, now time.Time) (*Stats, error) {
	st := &Stats{ByClass: map[string]int{}, ByAction: map[string]int{}, ByStatus: map[string]int{}, Patterns: []Pattern{}, Growth: []DayCount{}}
	patterns := map[string]*Pattern{}
	days := map[string]int{}
	err := s.Entries(ctx, func(er *store.EntryRecord) error {
		st.Entries++
		st.ByClass[string(er.Class)]++
		st.ByAction[string(er.Action)]++
		st.ByStatus[er.Status]++
		sig := Signature(er)
		p := patterns[sig]
		if p == nil {
			p = &Pattern{Signature: sig, Class: string(er.Class), Example: er.Entry.Ref()}
			patterns[sig] = p
		}
		p.Count++
		days[er.FirstSeen.UTC().Format("2006-01-02")]++
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, p := range patterns {
		st.Patterns = append(st.Patterns, *p)
	}
	sort.Slice(st.Patterns, func(i, j int) bool {
		if st.Patterns[i].Count != st.Patterns[j].Count {
			return st.Patterns[i].Count > st.Patterns[j].Count
		}
		return st.Patterns[i].Signature < st.Patterns[j].Signature
	})
	if len(st.Patterns) > 10 {
		st.Patterns = st.Patterns[:10]
	}
	growth(st, days, now)
	err = audit.Each(ctx, s, audit.Query{Kind: audit.KindDecision}, func(r audit.Record) error {
		if proposed, denied := r.ReplayProposal(); proposed {
			st.Decisions++
			if denied {
				st.Denied++
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if st.Decisions > 0 {
		st.DenialRate = float64(st.Denied) / float64(st.Decisions)
	}
	return st, approvalStats(ctx, s, st)
}

// The counters give the same report the scan of every entry and of the
// whole audit chain gave, without either.
func TestStatsFromCountersEqualTheScan(t *testing.T) {
	b := statsBundle(t)
	ctx := context.Background()
	want, err := scanStats(ctx, b.store, b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	got, err := ComputeStats(ctx, noScan{b.store, t}, b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Only the counters keep hours: the run's inflow, drain and decisions.
	if len(got.Hourly) != 1 || got.Hourly[0].Inflow != 5 || got.Hourly[0].Drained != 2 || got.Hourly[0].Decisions != 3 || got.Hourly[0].Denied != 1 {
		t.Fatalf("hourly %+v", got.Hourly)
	}
	got.Hourly = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stats from counters\n got %+v\nwant %+v", got, want)
	}
	if got.Decisions == 0 || got.Entries != 5 {
		t.Fatalf("degenerate fixture: %+v", got)
	}
	counts, _, err := CountByStatus(ctx, noScan{b.store, t})
	if err != nil || !reflect.DeepEqual(counts, want.ByStatus) {
		t.Fatalf("count by status %v %v, want %v", counts, err, want.ByStatus)
	}
}

// Listing follows cursors from the indexes, honours topic globs, labels
// and search, and never carries a payload.
func TestListByCursorFromTheIndexes(t *testing.T) {
	b := statsBundle(t)
	ctx := context.Background()
	s := noScan{b.store, t}
	for _, tc := range []struct {
		f    Filter
		want []string
	}{
		{Filter{}, []string{"jsonl:e1", "jsonl:e2", "jsonl:h1", "jsonl:p1", "jsonl:p2"}},
		{Filter{Topic: "orders.*"}, []string{"jsonl:p1", "jsonl:p2"}},
		{Filter{Q: "FIELD 99"}, []string{"jsonl:p2"}},
		{Filter{Labels: map[string]string{"team": "billing"}}, []string{"jsonl:p1"}},
		{Filter{States: []string{store.StatusReplayed}, Topic: "tool.**"}, []string{"jsonl:e1", "jsonl:e2"}}, // h1 approved, not yet replayed
		// As in rules.yaml: '*' stays within one segment of the topic.
		{Filter{Topic: "tool.*"}, nil},
	} {
		var got []string
		cursor := ""
		for {
			p, err := ListAfter(ctx, s, tc.f, cursor, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range p.Items {
				if it.Entry.Payload != nil {
					t.Fatalf("%s listed with its payload", it.Entry.Ref())
				}
				got = append(got, it.Entry.Ref())
			}
			if p.Next == "" {
				break
			}
			cursor = p.Next
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("filter %+v: got %v, want %v", tc.f, got, tc.want)
		}
	}
	// Page numbers still work, through the cursors.
	p, err := List(ctx, s, Filter{}, 1, 2)
	if err != nil || len(p.Items) != 2 || p.Items[0].Entry.Ref() != "jsonl:h1" || p.Total != 5 || !p.TotalExact || p.Page != 1 {
		t.Fatalf("page 1: %+v %v", p, err)
	}
	p, err = List(ctx, s, Filter{}, 7, 2)
	if err != nil || len(p.Items) != 0 || p.Total != 5 {
		t.Fatalf("page past the end: %+v %v", p, err)
	}
}

// One entry is read from its own index ranges: a bare id through the id
// index, its history through the per-entry audit index, with the same
// records a walk of the whole chain finds.
func TestShowReadsTheEntryIndexesNotTheChain(t *testing.T) {
	b := statsBundle(t)
	ctx := context.Background()
	var want []uint64
	if err := audit.Each(ctx, b.store, audit.Query{}, func(r audit.Record) error {
		if r.EntryRef == "jsonl:h1" || (r.EntryRef == "" && r.Key == "k3") {
			want = append(want, r.Seq)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	d, err := Show(ctx, noScan{b.store, t}, "h1")
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, r := range d.Decisions {
		got = append(got, r.Seq)
	}
	if len(want) < 3 || !reflect.DeepEqual(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	if d.Entry.Entry.Ref() != "jsonl:h1" || d.Entry.Entry.Payload == nil {
		t.Fatalf("entry %+v", d.Entry)
	}
	if _, err := Find(ctx, noScan{b.store, t}, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

// A file written before the indexes, opened read-only (dlq list and stats
// open it so), has no indexes to read: every read that needs them says so
// and how to build them (any read-write open), rather than scanning the
// whole store behind the caller's back (issue 33: one path per caller).
func TestUnindexedReadOnlyFileSaysHowToIndexIt(t *testing.T) {
	b := statsBundle(t)
	ctx := context.Background()
	path := b.store.Path()
	b.store.Close()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		for _, name := range []string{"idx", "counters", "sigmeta"} {
			if err := tx.DeleteBucket([]byte(name)); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte("meta")).Delete([]byte("index_version"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	ro, err := bolt.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ComputeStats(ctx, ro, b.clock.Now()); !errors.Is(err, store.ErrNotIndexed) {
		t.Fatalf("stats of the unindexed file: %v", err)
	}
	if _, err := List(ctx, ro, Filter{Topic: "orders.*"}, 0, 20); !errors.Is(err, store.ErrNotIndexed) {
		t.Fatalf("list of the unindexed file: %v", err)
	}
	if _, err := Show(ctx, ro, "h1"); !errors.Is(err, store.ErrNotIndexed) {
		t.Fatalf("show on the unindexed file: %v", err)
	}
	// By ref too: the entry's history is read from its audit index.
	if d, err := Show(ctx, ro, "jsonl:h1"); !errors.Is(err, store.ErrNotIndexed) {
		t.Fatalf("show by ref on the unindexed file: %+v %v", d, err)
	}
	ro.Close()
	// Any read-write open builds them; then everything reads again.
	rw, err := bolt.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if d, err := Show(ctx, noScan{rw, t}, "h1"); err != nil || len(d.Decisions) == 0 {
		t.Fatalf("show after a read-write open: %+v %v", d, err)
	}
}
