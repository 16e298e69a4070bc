package replay

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/source"
)

// A canary whose slice fails stops the run with the evidence: only the
// slice was sent, the rest untouched, and the verdict is audited.
func TestCanaryAbortsWhenTheSliceFails(t *testing.T) {
	b, _ := outage(t)
	ctx := context.Background()
	b.sink.mu.Lock()
	b.sink.status = func(string, int) int { return http.StatusUnprocessableEntity } // the fix is not deployed: refused
	b.sink.mu.Unlock()
	c, err := ParseCanary("10%")
	if err != nil {
		t.Fatal(err)
	}
	c.Watch = Duration{Duration: time.Minute}
	bulk := b.bulk(0, 0)
	rep, err := bulk.ExecuteCanary(ctx, BulkFilter{Classes: []string{"transient"}}, c)
	if err != nil {
		t.Fatal(err)
	}
	cr := rep.Canary
	if cr == nil || !cr.Aborted || len(cr.Slice) != 5 || cr.Failed != 5 || cr.Untouched != 40 || !strings.HasPrefix(rep.Stopped, "aborted by canary: 5 of 5 failed") {
		t.Fatalf("canary %+v, stopped %q", cr, rep.Stopped)
	}
	if n := len(b.sink.perKey()); n != 5 {
		t.Errorf("%d keys sent, want only the slice's 5", n)
	}
	if slept := b.clock.slept(); len(slept) != 1 || slept[0] != time.Minute {
		t.Errorf("watched %v, want one minute", slept)
	}
	found := false
	if err := audit.Each(ctx, b.store, audit.Query{Kind: audit.KindBulk}, func(r audit.Record) error {
		found = found || r.Outcome == "canary aborted" && strings.Contains(string(r.Detail), `"aborted":true`)
		return nil
	}); err != nil || !found {
		t.Errorf("no audited canary verdict (%v)", err)
	}
}

// A canary whose slice succeeds goes on with the rest: every key once.
func TestCanaryPassesThenReplaysTheRest(t *testing.T) {
	b, _ := outage(t)
	ctx := context.Background()
	bulk := b.bulk(0, 0)
	rep, err := bulk.ExecuteCanary(ctx, BulkFilter{Classes: []string{"transient"}}, Canary{N: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Canary == nil || rep.Canary.Aborted || rep.Canary.Failed != 0 || rep.Stopped != "" {
		t.Fatalf("canary %+v, stopped %q", rep.Canary, rep.Stopped)
	}
	sent := b.sink.perKey()
	if len(sent) != 45 {
		t.Fatalf("%d keys sent, want 45", len(sent))
	}
	for k, n := range sent {
		if n != 1 {
			t.Errorf("%s sent %d times", k, n)
		}
	}
}

// The slice is spread across targets and topics: a bad topic shows in it.
func TestCanarySliceSpreadsAcrossTopics(t *testing.T) {
	items := []BulkItem{{Ref: "a1"}, {Ref: "a2"}, {Ref: "a3"}, {Ref: "b1"}, {Ref: "c1"}, {Ref: "c2"}}
	bucket := map[string]string{"a1": "t\x00a", "a2": "t\x00a", "a3": "t\x00a", "b1": "t\x00b", "c1": "u\x00c", "c2": "u\x00c"}
	if got := strings.Join(spreadSlice(items, bucket, 4), ","); got != "a1,b1,c1,a2" {
		t.Errorf("slice %s", got)
	}
	for _, bad := range []string{"0", "-1", "0%", "150%", "x"} {
		if _, err := ParseCanary(bad); !errors.Is(err, ErrBadFilter) {
			t.Errorf("ParseCanary(%q): %v", bad, err)
		}
	}
	if r, err := ParseRate("5%"); err != nil || r != 0.05 {
		t.Errorf("ParseRate(5%%) = %v, %v", r, err)
	}
	if _, err := ParseRate("2"); err == nil {
		t.Error("a rate above 1 is refused")
	}
}

// comesBack makes the sink a downstream that takes every delivery (200)
// and then dead-letters the keys in back again: a new record in dlq.jsonl
// stamped with the replay's replayctl-lineage (as a connector that keeps
// headers reads it back, TestLineageStampLinksAMessageThatComesBack).
func comesBack(t *testing.T, b *testBundle, entries []map[string]any, back func(key string) bool) *Bulk {
	t.Helper()
	src := b.jsonl("dlq.jsonl", entries...) // the same file the outage read
	path := filepath.Join(b.dir, "dlq.jsonl")
	b.sink.mu.Lock()
	b.sink.status = func(key string, n int) int {
		if !back(key) {
			return http.StatusOK
		}
		last := b.sink.got[len(b.sink.got)-1]
		rec := transient(last.EntryID+"-again", key+"-again")
		rec["labels"] = map[string]string{"replayctl-lineage": last.Lineage}
		line, err := json.Marshal(rec)
		if err != nil {
			t.Error(err)
			return http.StatusOK
		}
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return http.StatusOK
		}
		defer f.Close()
		if _, err := f.Write(append(line, '\n')); err != nil {
			t.Error(err)
		}
		return http.StatusOK
	}
	b.sink.mu.Unlock()
	bulk := b.bulk(0, 0)
	bulk.Sources = []source.Source{src}
	return bulk
}

// TestCanaryCountsEntriesThatComeBack: the slice's deliveries all
// succeed, but the downstream dead-letters them again (same lineage):
// during the watch the run re-reads its source, counts them as failed,
// and aborts with the rest untouched.
func TestCanaryCountsEntriesThatComeBack(t *testing.T) {
	b, entries := outage(t)
	bulk := comesBack(t, b, entries, func(string) bool { return true })
	rep, err := bulk.ExecuteCanary(context.Background(), BulkFilter{Classes: []string{"transient"}}, Canary{N: 3, Watch: Duration{Duration: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	cr := rep.Canary
	if cr == nil || !cr.Aborted || cr.Failed != 0 || cr.Returned != 3 || cr.Untouched != 42 || !strings.HasPrefix(rep.Stopped, "aborted by canary: 3 of 3 failed") {
		t.Fatalf("canary %+v, stopped %q", cr, rep.Stopped)
	}
	if n := len(b.sink.perKey()); n != 3 {
		t.Errorf("%d keys sent, want only the slice's 3", n)
	}
}

// TestCanaryGoesOnWhenNothingComesBack: the same run with a downstream
// that keeps what it takes, and one unrelated new entry in the source,
// passes and replays the rest once.
func TestCanaryGoesOnWhenNothingComesBack(t *testing.T) {
	b, entries := outage(t)
	entries = append(entries, transient("late", "k-late")) // new, but of no slice lineage
	bulk := comesBack(t, b, entries, func(string) bool { return false })
	rep, err := bulk.ExecuteCanary(context.Background(), BulkFilter{Classes: []string{"transient"}}, Canary{N: 3, Watch: Duration{Duration: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if cr := rep.Canary; cr == nil || cr.Aborted || cr.Returned != 0 || rep.Stopped != "" {
		t.Fatalf("canary %+v, stopped %q", cr, rep.Stopped)
	}
	if n := len(b.sink.perKey()); n != 45 {
		t.Errorf("%d keys sent, want 45", n)
	}
}

// ingestingClock is the bulk's clock with an ingest during the watch (as
// the server's poll or a reconcile cron does while a CLI canary waits).
type ingestingClock struct {
	*fakeClock
	during func()
}

func (c ingestingClock) Sleep(ctx context.Context, d time.Duration) error {
	c.during()
	return c.fakeClock.Sleep(ctx, d)
}

// TestCanarySeesReturnsAnotherRunIngested: a bulk run without sources
// (`dlq replay --filter`) reads the store's lineage records: the slice's
// replays came back and another run ingested them during the watch, so
// the canary aborts.
func TestCanarySeesReturnsAnotherRunIngested(t *testing.T) {
	b, _ := outage(t)
	bulk := b.bulk(0, 0)
	bulk.Reconciler.Clock = ingestingClock{fakeClock: b.clock, during: func() {
		var back []map[string]any
		for _, d := range b.sink.deliveries() {
			rec := transient(d.EntryID+"-again", d.Key+"-again")
			rec["labels"] = map[string]string{"replayctl-lineage": d.Lineage}
			back = append(back, rec)
		}
		r := b.reconciler(1)
		r.Router = NewRulesRouter(b.engine.Rules, nil) // ingest only: nowhere to send
		b.run(r, b.jsonl("back.jsonl", back...))
	}}
	rep, err := bulk.ExecuteCanary(context.Background(), BulkFilter{Classes: []string{"transient"}}, Canary{N: 2, Watch: Duration{Duration: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if cr := rep.Canary; cr == nil || !cr.Aborted || cr.Returned != 2 {
		t.Fatalf("canary %+v, stopped %q", cr, rep.Stopped)
	}
}
