package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/triage"
)

// outage ingests entries while no target was configured (they wait in
// manual review), as after a downstream outage: 45 transient, 3 high-risk
// transient, 5 poison.
func outage(t *testing.T) (*testBundle, []map[string]any) {
	b := newBundle(t, baseRules)
	var entries []map[string]any
	for i := range 45 {
		entries = append(entries, transient(fmt.Sprintf("t%02d", i), fmt.Sprintf("kt%02d", i)))
	}
	for i := range 3 {
		entries = append(entries, highRisk(fmt.Sprintf("h%d", i), fmt.Sprintf("kh%d", i)))
	}
	for i := range 5 {
		entries = append(entries, map[string]any{"id": fmt.Sprintf("p%d", i), "reason_code": "schema_invalid", "idempotency_key": fmt.Sprintf("kp%d", i)})
	}
	r := b.reconciler(4)
	r.Router = NewRulesRouter(b.engine.Rules, nil) // the outage: nowhere to send
	b.run(r, b.jsonl("dlq.jsonl", entries...))
	if n := len(b.sink.deliveries()); n != 0 {
		t.Fatalf("delivered during the outage: %d", n)
	}
	return b, entries
}

func (b *testBundle) bulk(max int, spread time.Duration) *Bulk {
	return &Bulk{Reconciler: b.reconciler(1), Inventory: b.store, Max: max, Spread: spread}
}

func TestBulkReplayActsOnEveryMatchAcrossPagesAndMatchesItsPreview(t *testing.T) {
	b, _ := outage(t)
	ctx := context.Background()
	// 48 matches: more than two pages of `dlq list`.
	if p, _ := List(ctx, b.store, Filter{Classes: []string{"transient"}}, 0, 20); p.Total != 48 {
		t.Fatalf("listing total %d", p.Total)
	}
	f := BulkFilter{Classes: []string{"transient"}}
	preview, err := b.bulk(0, 0).PreviewReplay(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if preview.Matched != 48 || preview.Would != 45 || preview.Why[WhyApproval] != 3 {
		t.Fatalf("preview %+v", preview)
	}
	if n := len(b.sink.deliveries()); n != 0 {
		t.Fatal("a preview dispatched")
	}
	done, err := b.bulk(0, 0).ExecuteReplay(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(b.sink.perKey()); got != 45 {
		t.Fatalf("delivered %d keys, want all 45 across pages", got)
	}
	// Entry by entry, the execution did what the preview said.
	strip := func(items []BulkItem) []BulkItem {
		out := make([]BulkItem, len(items))
		for i, it := range items {
			out[i] = BulkItem{Ref: it.Ref, Category: it.Category}
		}
		return out
	}
	if !reflect.DeepEqual(strip(preview.Items), strip(done.Items)) {
		t.Fatalf("preview and execution differ:\n%v\n%v", preview.Items, done.Items)
	}
	if done.Replays["succeeded"] != 45 || done.Would != preview.Would || !reflect.DeepEqual(done.Why, preview.Why) {
		t.Fatalf("execution %+v", done)
	}
	// The bulk operation is recorded before any dispatch.
	var bulkSeq, firstDispatch uint64
	_ = audit.Each(ctx, b.store, audit.Query{}, func(r audit.Record) error {
		if r.Kind == audit.KindBulk && bulkSeq == 0 {
			bulkSeq = r.Seq
		}
		if r.Kind == audit.KindDispatch && firstDispatch == 0 {
			firstDispatch = r.Seq
		}
		return nil
	})
	if bulkSeq == 0 || bulkSeq > firstDispatch || bulkSeq != done.AuditSeq {
		t.Fatalf("bulk record %d, first dispatch %d", bulkSeq, firstDispatch)
	}
	// And once finished, a second record says what was done (issue 17: it
	// used to be the preview's "preview": true, "done": 0).
	var last audit.Record
	_ = audit.Each(ctx, b.store, audit.Query{}, func(r audit.Record) error {
		if r.Kind == audit.KindBulk {
			last = r
		}
		return nil
	})
	var finished struct {
		Phase       string
		Started     uint64 `json:"started_record"`
		Done, Acted int
		Replays     map[string]int
		Preview     *bool
	}
	if err := json.Unmarshal(last.Detail, &finished); err != nil || last.Seq == bulkSeq || finished.Phase != "finished" ||
		finished.Started != bulkSeq || finished.Done != 48 || finished.Acted != 45 || finished.Replays["succeeded"] != 45 || finished.Preview != nil {
		t.Fatalf("finished record #%d %s: %+v %v", last.Seq, last.Detail, finished, err)
	}
	// A second preview now says why nothing would be replayed.
	again, _ := b.bulk(0, 0).PreviewReplay(ctx, f)
	if again.Would != 0 || again.Why[WhyCommitted] != 45 {
		t.Fatalf("after execution: %+v", again.Why)
	}
}

func TestBulkCapAndSpread(t *testing.T) {
	b, _ := outage(t)
	ctx := context.Background()
	f := BulkFilter{Reasons: []string{"timeout"}, Labels: map[string]string{}}
	before := len(b.clock.slept())
	rep, err := b.bulk(10, 9*time.Second).ExecuteReplay(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(b.sink.deliveries()); n != 10 {
		t.Fatalf("cap 10: delivered %d", n)
	}
	// The cap counts replays: 35 more would have been sent; the 3
	// high-risk entries await approval either way.
	if rep.Why[WhyOverCap] != 35 || rep.Why[WhyApproval] != 3 || rep.Would != 10 {
		t.Fatalf("would %d, why %v", rep.Would, rep.Why)
	}
	// 10 replays spread over 9s: 9 gaps of 900ms, none before the first.
	var gaps []time.Duration
	for _, d := range b.clock.slept()[before:] {
		gaps = append(gaps, d)
	}
	if len(gaps) != 9 {
		t.Fatalf("gaps %v", gaps)
	}
	for _, g := range gaps {
		if g != 900*time.Millisecond {
			t.Fatalf("gap %s, want 900ms (%v)", g, gaps)
		}
	}
}

func TestInterruptedBulkReplayResumesWithoutDoubleDelivery(t *testing.T) {
	b, _ := outage(t)
	ctx, cancel := context.WithCancel(context.Background())
	b.sink.mu.Lock()
	b.sink.status = func(_ string, _ int) int {
		if len(b.sink.got) == 12 {
			cancel() // Ctrl-C in the middle of the operation
		}
		return http.StatusOK
	}
	b.sink.mu.Unlock()
	f := BulkFilter{Classes: []string{"transient"}}
	rep, err := b.bulk(0, 0).ExecuteReplay(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stopped == "" || len(b.sink.deliveries()) >= 45 {
		t.Fatalf("not interrupted: %+v, %d deliveries", rep.Stopped, len(b.sink.deliveries()))
	}
	if _, err := b.bulk(0, 0).ExecuteReplay(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	got := b.sink.perKey()
	if len(got) != 45 {
		t.Fatalf("after resume %d keys delivered", len(got))
	}
	for k, n := range got {
		if n != 1 {
			t.Errorf("key %s delivered %d times", k, n)
		}
	}
}

func TestBulkResolve(t *testing.T) {
	b, _ := outage(t)
	ctx := context.Background()
	f := BulkFilter{Classes: []string{"poison"}}
	preview, err := b.bulk(0, 0).PreviewResolve(ctx, f)
	if err != nil || preview.Would != 5 {
		t.Fatalf("preview %+v %v", preview, err)
	}
	if _, err := b.bulk(0, 0).ExecuteResolve(ctx, f, ""); err == nil {
		t.Fatal("bulk resolve without a reason")
	}
	rep, err := b.bulk(0, 0).ExecuteResolve(ctx, f, "bad payloads from the v2 adapter, fixed upstream")
	if err != nil || rep.Would != 5 {
		t.Fatalf("%+v %v", rep, err)
	}
	if er := b.entry("jsonl:p0"); er.Status != "resolved" {
		t.Fatalf("status %s", er.Status)
	}
	if again, _ := b.bulk(0, 0).PreviewResolve(ctx, f); again.Would != 0 || again.Why[WhyNotOpen] != 5 {
		t.Fatalf("again %+v", again)
	}
}

func TestBulkFilterValidation(t *testing.T) {
	for _, f := range []BulkFilter{{Topics: []string{"[a"}}, {Classes: []string{"weird"}}, {States: []string{"gone"}},
		{}, {Labels: map[string]string{}}, {All: true, Classes: []string{"transient"}}} { // empty: would match everything (issue 17)
		if err := f.Compile(); !errors.Is(err, ErrBadFilter) {
			t.Errorf("%+v: %v, want ErrBadFilter", f, err)
		}
	}
	if f := (BulkFilter{All: true}); f.Compile() != nil {
		t.Errorf("all refused")
	}
	_ = triage.AutoReplay
}

// A bulk replay whose entries have no target is refused before anything
// changes: no audit record, no ledger write, no dispatch (issue 17).
func TestBulkReplayWithoutTargetChangesNothing(t *testing.T) {
	b, _ := outage(t)
	ctx := context.Background()
	bk := b.bulk(0, 0)
	bk.Reconciler.Router = NewRulesRouter(b.engine.Rules, nil)
	f := BulkFilter{Classes: []string{"transient"}}
	preview, err := bk.PreviewReplay(ctx, f)
	if err != nil || preview.Would != 0 || preview.Why[WhyNoTarget] != 45 {
		t.Fatalf("preview %+v %v", preview, err)
	}
	before, _ := List(ctx, b.store, Filter{}, 0, 100)
	var records int
	count := func() int {
		n := 0
		_ = audit.Each(ctx, b.store, audit.Query{}, func(audit.Record) error { n++; return nil })
		return n
	}
	records = count()
	if _, err := bk.ExecuteReplay(ctx, f); !errors.Is(err, ErrNoTarget) {
		t.Fatalf("executed without a target: %v", err)
	}
	after, _ := List(ctx, b.store, Filter{}, 0, 100)
	if !reflect.DeepEqual(before, after) || count() != records || len(b.sink.deliveries()) != 0 {
		t.Fatalf("a refused bulk replay changed something: %d -> %d records", records, count())
	}
}
