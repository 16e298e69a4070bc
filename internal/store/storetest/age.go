package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// gauger is a backend that reads a scrape's counts alone (the server's
// metrics read Gauges where a store has it).
type gauger interface {
	Gauges(ctx context.Context) (*store.Gauges, error)
}

// oldestOpenByLastFailure: the oldest open entry is the one whose last
// failure is oldest, not the one first seen longest ago (issue 30: the
// overview said "oldest open 4m" while the list held open entries last
// failed 26 days ago), and it follows every write: a re-failure makes an
// entry young again, a resolve takes it out, an entry without a last
// failure counts from when it was first seen.
func oldestOpenByLastFailure(t *testing.T, s store.Backend) {
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	put := func(id, status string, firstSeen, lastFailure time.Time) {
		t.Helper()
		r := &store.EntryRecord{Entry: entry.Entry{ID: id, Source: "jsonl", Topic: "orders", IdempotencyKey: "key-" + id,
			Message: "upstream timeout", LastFailure: lastFailure, Payload: []byte(`{}`)},
			Status: status, Class: triage.Transient, Action: triage.AutoReplay, FirstSeen: firstSeen, LastSeen: now}
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutEntry(r) }); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, want time.Time) {
		t.Helper()
		c, err := s.Counters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !c.OldestOpen.Equal(want) {
			t.Errorf("%s: Counters.OldestOpen %v, want %v", step, c.OldestOpen, want)
		}
		if g, ok := s.(gauger); ok {
			gs, err := g.Gauges(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !gs.OldestOpen.Equal(want) {
				t.Errorf("%s: Gauges.OldestOpen %v, want %v", step, gs.OldestOpen, want)
			}
		}
	}
	check("empty", time.Time{})

	// First seen 30 days ago, failed again an hour ago: an hour old.
	put("refailed", store.StatusPending, now.AddDate(0, 0, -30), now.Add(-time.Hour))
	check("an old entry that failed again", now.Add(-time.Hour))

	// First seen today (a new store reading an old DLQ), last failed 26
	// days ago: the oldest.
	put("stale", store.StatusQuarantined, now.Add(-time.Minute), now.AddDate(0, 0, -26))
	check("an entry last failed long ago", now.AddDate(0, 0, -26))

	// No last failure: first seen is its age. A closed entry has none.
	put("noclock", store.StatusFailed, now.Add(-2*time.Hour), time.Time{})
	put("done", store.StatusReplayed, now.AddDate(0, 0, -90), now.AddDate(0, 0, -90))
	check("closed entries have no age", now.AddDate(0, 0, -26))

	put("stale", store.StatusResolved, now.Add(-time.Minute), now.AddDate(0, 0, -26))
	check("the oldest resolved", now.Add(-2*time.Hour))

	// It fails again: young again.
	put("noclock", store.StatusFailed, now.Add(-2*time.Hour), now.Add(-time.Minute))
	check("a re-failure", now.Add(-time.Hour))
}
