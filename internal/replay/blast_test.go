package replay

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// Every bulk preview carries its blast radius: by target of what it would
// replay, by topic, source and class of what matches, the keys the ledger
// already has committed, the span of failures and the duration at the
// chosen rate.
func TestBulkPreviewShowsBlastRadius(t *testing.T) {
	b, _ := outage(t)
	ctx := context.Background()
	bulk := b.bulk(0, 0)
	bulk.Reconciler.Rate = 5
	f := BulkFilter{All: true}
	p, err := bulk.PreviewReplay(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	br := p.Blast
	if br == nil {
		t.Fatal("no blast radius")
	}
	if !reflect.DeepEqual(br.ByTarget, map[string]int{"sink": 45}) || br.ByTopic["tool.email.send"] != 48 || br.BySource["jsonl"] != 53 ||
		br.ByClass["transient"] != 48 || br.ByClass["poison"] != 5 {
		t.Errorf("counts: %+v", br)
	}
	if br.Ledger == nil || br.Ledger.Committed != 0 || br.Expected != (9*time.Second).String() || br.OldestFailure.IsZero() {
		t.Errorf("ledger %+v, expected %q, oldest %v", br.Ledger, br.Expected, br.OldestFailure)
	}
	if _, err := bulk.ExecuteReplay(ctx, BulkFilter{Classes: []string{"transient"}}); err != nil {
		t.Fatal(err)
	}
	p, err = b.bulk(0, 0).PreviewReplay(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if p.Blast.Ledger.Committed != 45 || len(p.Blast.ByTarget) != 0 || p.Blast.Expected != "0s" {
		t.Errorf("after the replay: ledger %+v, targets %v, expected %q", p.Blast.Ledger, p.Blast.ByTarget, p.Blast.Expected)
	}
	r, err := b.bulk(0, 0).PreviewResolve(ctx, BulkFilter{Classes: []string{"poison"}})
	if err != nil || r.Blast == nil || r.Blast.Ledger != nil || r.Blast.ByClass["poison"] != 5 {
		t.Errorf("resolve preview's blast radius: %+v %v (a resolve reads no ledger: none shown)", r.Blast, err)
	}
}
