package replay

import (
	"context"
	"slices"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
)

// EachAudit yields what a walk of the whole chain yields for every query
// (audit list, GET /api/audit and the console read through it), and for
// an entry, an actor, a kind or a time it reads the indexes, never the
// chain (noScan refuses AuditRange).
func TestEachAuditReadsTheIndexesAsTheChainSays(t *testing.T) {
	b := statsBundle(t)
	ctx := context.Background()
	var chain []audit.Record
	if err := audit.Each(ctx, b.store, audit.Query{}, func(r audit.Record) error { chain = append(chain, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(chain) < 8 {
		t.Fatalf("%d records: the fixture proves nothing", len(chain))
	}
	mid := chain[len(chain)/2]
	queries := []audit.Query{
		{Entry: "h1"}, {Entry: "jsonl:e1"}, {Entry: "jsonl:gone"},
		{Actor: mid.Actor}, {Kind: audit.KindDecision}, {Kind: mid.Kind, Actor: mid.Actor},
		{Since: mid.Time}, {Entry: "jsonl:h1", Kind: audit.KindApproval},
		{Actor: mid.Actor, Action: mid.Kind},
	}
	for _, q := range queries {
		for _, from := range []uint64{1, mid.Seq} {
			var want, got []uint64
			if err := audit.EachFrom(ctx, b.store, from, q, func(r audit.Record) error { want = append(want, r.Seq); return nil }); err != nil {
				t.Fatal(err)
			}
			if err := EachAudit(ctx, noScan{b.store, t}, from, q, func(r audit.Record) error { got = append(got, r.Seq); return nil }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("query %+v from %d: %v, the chain says %v", q, from, got, want)
			}
			if len(want) == 0 && from == 1 && q.Entry != "jsonl:gone" {
				t.Errorf("query %+v matches nothing: the case proves nothing", q)
			}
		}
	}
	// An action alone is in no index: the chain, and the same answer.
	var want, got []uint64
	q := audit.Query{Action: audit.KindOutcome}
	_ = audit.EachFrom(ctx, b.store, 1, q, func(r audit.Record) error { want = append(want, r.Seq); return nil })
	if err := EachAudit(ctx, b.store, 1, q, func(r audit.Record) error { got = append(got, r.Seq); return nil }); err != nil || !slices.Equal(got, want) {
		t.Errorf("action alone: %v %v, want %v", got, err, want)
	}
}
