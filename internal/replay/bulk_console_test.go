package replay

import (
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// TestBulkFilterSelectionAndSearch: the console's "these entries" (ids),
// action filter and search box select through the same BulkFilter as the
// CLI, so a bulk action on what a person sees acts on exactly that.
func TestBulkFilterSelectionAndSearch(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	rec := func(id, key, topic, msg string, action triage.Action) *store.EntryRecord {
		return &store.EntryRecord{Entry: entry.Entry{ID: id, Source: "jsonl", IdempotencyKey: key, Topic: topic, Message: msg},
			Status: store.StatusManualReview, Action: action, FirstSeen: now}
	}
	recs := []*store.EntryRecord{
		rec("a1", "order-17", "tool.email.send", "SMTP timeout", triage.ManualReview),
		rec("a2", "order-18", "tool.github.issue", "rate limited", triage.RequireApproval),
		rec("a3", "charge-9", "tool.stripe.charge", "Card Declined", triage.ManualReview),
	}
	cases := []struct {
		name string
		f    BulkFilter
		want []string
	}{
		{"bare ids and refs", BulkFilter{IDs: []string{"a1", "jsonl:a3"}}, []string{"a1", "a3"}},
		{"action", BulkFilter{Actions: []string{"require_approval"}}, []string{"a2"}},
		{"text in key", BulkFilter{Text: "ORDER-"}, []string{"a1", "a2"}},
		{"text in message, any case", BulkFilter{Text: "declined"}, []string{"a3"}},
		{"text in topic", BulkFilter{Text: "github"}, []string{"a2"}},
		{"text in id", BulkFilter{Text: "jsonl:a2"}, []string{"a2"}},
		{"text and ids together", BulkFilter{Text: "order", IDs: []string{"a2", "a3"}}, []string{"a2"}},
	}
	for _, c := range cases {
		if err := c.f.Compile(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []string
		for _, r := range recs {
			if c.f.Match(r, now) {
				got = append(got, r.Entry.ID)
			}
		}
		if len(got) != len(c.want) {
			t.Fatalf("%s: matched %v, want %v", c.name, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("%s: matched %v, want %v", c.name, got, c.want)
			}
		}
	}
	// A search alone is a filter: it does not need all.
	f := BulkFilter{Text: "x"}
	if err := f.Compile(); err != nil {
		t.Fatalf("search-only filter refused: %v", err)
	}
}
