package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Issue 15, second scenario: entries that reached max_replays (or failed)
// during an outage are re-armed by a filtered redrive with --reset-budget
// whose preview counts equal what it then does, entry by entry; one audit
// record for the operation and one per re-armed entry.
func TestResetBudgetRedriveDoesWhatItsPreviewSays(t *testing.T) {
	b := newBundle(t, baseRules)
	ctx := context.Background()
	down := true
	b.sink.status = func(key string, _ int) int {
		switch {
		case !down:
			return http.StatusOK
		case strings.HasPrefix(key, "bad"):
			return http.StatusBadRequest // a misrouted gateway during the outage: failed
		case strings.HasPrefix(key, "ok"):
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	}
	var entries []map[string]any
	flaky := func(id string) map[string]any {
		return map[string]any{"id": id, "topic": "tool.flaky.sync", "reason_code": "timeout", "idempotency_key": id}
	}
	for i := range 20 {
		entries = append(entries, flaky(fmt.Sprintf("max%02d", i)))
	}
	for i := range 3 {
		entries = append(entries, flaky(fmt.Sprintf("bad%d", i)))
	}
	for i := range 2 {
		entries = append(entries, flaky(fmt.Sprintf("ok%d", i)))
	}
	for i := range 3 {
		e := highRisk(fmt.Sprintf("hr%d", i), fmt.Sprintf("hr%d", i))
		e["topic"] = "tool.flaky.pay"
		entries = append(entries, e)
	}
	// Retries are due times, not sleeps, and a breaker would hold the
	// target after 5 failures (issue 15): the setup run waits for its
	// retries and keeps its breaker closed so the outage burns the budget,
	// as it did before breakers existed.
	setup := waitingFor(time.Hour, b.reconciler(2))
	setup.Breakers = &Breakers{Failures: 1000}
	b.run(setup, b.jsonl("dlq.jsonl", entries...))
	for i := range 20 {
		ref := fmt.Sprintf("jsonl:max%02d", i)
		if er := b.entry(ref); er.Status != store.StatusManualReview {
			t.Fatalf("setup: %s %s %q", ref, er.Status, er.Reason)
		}
	}
	if er := b.entry("jsonl:bad0"); er.Status != store.StatusFailed {
		t.Fatalf("setup: bad0 %s", er.Status)
	}
	before := b.sink.perKey()

	// Without --reset-budget the redrive would do nothing for them.
	f := BulkFilter{Topics: []string{"tool.flaky.**"}}
	plain, err := b.bulk(0, 0).PreviewReplay(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Would != 0 || plain.Why[WhyMaxReplays] != 20 || plain.ReArm != 0 {
		t.Fatalf("plain preview: would %d, %v", plain.Would, plain.Why)
	}

	down = false
	redrive := func() *Bulk {
		bk := b.bulk(0, 0)
		bk.ResetBudget, bk.Reason = true, "gateway fixed after INC-42"
		return bk
	}
	preview, err := redrive().PreviewReplay(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	// 23 re-armed and replayed, 2 already committed, 3 await approval
	// (never re-armed: they never reached max_replays).
	if preview.Matched != 28 || preview.ReArm != 23 || preview.Would != 23 ||
		preview.Why[WhyCommitted] != 2 || preview.Why[WhyApproval] != 3 || len(preview.Why) != 2 {
		t.Fatalf("preview: matched %d rearm %d would %d why %v", preview.Matched, preview.ReArm, preview.Would, preview.Why)
	}
	if !reflect.DeepEqual(b.sink.perKey(), before) {
		t.Fatal("a preview dispatched")
	}
	// A redrive without a reason is refused before anything changes.
	noReason := redrive()
	noReason.Reason = " "
	if _, err := noReason.ExecuteReplay(ctx, f); err == nil {
		t.Fatal("reset-budget without a reason was accepted")
	}

	done, err := redrive().ExecuteReplay(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	strip := func(items []BulkItem) []BulkItem {
		out := make([]BulkItem, len(items))
		for i, it := range items {
			out[i] = BulkItem{Ref: it.Ref, Category: it.Category, ReArm: it.ReArm}
		}
		return out
	}
	if !reflect.DeepEqual(strip(preview.Items), strip(done.Items)) {
		t.Fatalf("preview and execution differ:\n%v\n%v", preview.Items, done.Items)
	}
	if done.ReArm != preview.ReArm || done.Would != preview.Would || !reflect.DeepEqual(done.Why, preview.Why) ||
		done.Replays["succeeded"] != 23 {
		t.Fatalf("execution: rearm %d would %d why %v replays %v", done.ReArm, done.Would, done.Why, done.Replays)
	}
	// Entry by entry: each re-armed key delivered exactly once more and
	// replayed; nothing else sent.
	after := b.sink.perKey()
	for _, it := range done.Items {
		key := strings.TrimPrefix(it.Ref, "jsonl:")
		want := before[key]
		if it.ReArm {
			want++
			if er := b.entry(it.Ref); er.Status != store.StatusReplayed {
				t.Errorf("%s: %s %q", it.Ref, er.Status, er.Reason)
			}
			if v := b.ledger(key); v.State != triage.StateSucceeded {
				t.Errorf("%s: ledger %+v", key, v)
			}
		}
		if after[key] != want {
			t.Errorf("%s: %d deliveries, want %d", key, after[key], want)
		}
	}

	// One record for the operation (started, then finished), one re-arm
	// record per entry, each naming the operation and the reason.
	var started, finished, rearms int
	_ = audit.Each(ctx, b.store, audit.Query{}, func(r audit.Record) error {
		switch {
		case r.Kind == audit.KindBulk && r.Seq == done.AuditSeq:
			started++
			var d struct {
				ResetBudget bool `json:"reset_budget"`
				ReArm       int  `json:"rearm"`
				Reason      string
			}
			if err := json.Unmarshal(r.Detail, &d); err != nil || !d.ResetBudget || d.ReArm != 23 || d.Reason != "gateway fixed after INC-42" {
				t.Errorf("started record %s", r.Detail)
			}
		case r.Kind == audit.KindBulk:
			finished++
		case r.Kind == audit.KindRelease:
			rearms++
			if !strings.Contains(r.Reason, fmt.Sprintf("record %d", done.AuditSeq)) || !strings.Contains(r.Reason, "INC-42") {
				t.Errorf("re-arm record %q", r.Reason)
			}
		}
		return nil
	})
	if started != 1 || finished != 1 || rearms != 23 {
		t.Fatalf("audit: %d started, %d finished, %d re-arms (want 1, 1, 23)", started, finished, rearms)
	}

	// Run again: nothing left to re-arm or send.
	again, err := redrive().ExecuteReplay(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if again.ReArm != 0 || again.Would != 0 || !reflect.DeepEqual(b.sink.perKey(), after) {
		t.Fatalf("second redrive: rearm %d would %d", again.ReArm, again.Would)
	}
}
