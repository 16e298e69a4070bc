package replay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
)

// TestDispatchRecordNamesTheLedgersAttempt: the dispatch record is
// encoded before the intent's transaction for the attempt the decision's
// ledger view makes next; inside, when the ledger gives another one (a
// not_sent attempt spent no budget), the record names the ledger's
// attempt and budget. A first attempt the target never took (connection
// refused), then a second that it took: the second record says replay 1
// (the budget spent), attempt 2.
func TestDispatchRecordNamesTheLedgersAttempt(t *testing.T) {
	b := newBundle(t, baseRules)
	src := b.jsonl("dlq.jsonl", transient("e1", "order-1:email"))
	gone := httptest.NewServer(http.NotFoundHandler())
	url := gone.URL
	gone.Close() // nothing listens there now: not sent
	down := NewHTTPTarget(url+"/replay", "", 2*time.Second, nil)
	r1 := b.reconciler(1)
	r1.Router = NewRulesRouter(b.engine.Rules, &Route{Name: "sink", Dispatcher: down})
	if rep := b.run(r1, src); rep.Replays.Succeeded != 0 {
		t.Fatalf("first run %+v", rep.Replays)
	}
	b.clock.mu.Lock()
	b.clock.now = b.clock.now.Add(time.Hour) // past the retry's due time
	b.clock.mu.Unlock()
	if rep := b.run(b.reconciler(1), src); rep.Replays.Succeeded != 1 {
		t.Fatalf("second run %+v", rep.Replays)
	}
	var reasons []string
	if err := audit.Each(context.Background(), b.store, audit.Query{}, func(r audit.Record) error {
		if r.Kind == audit.KindDispatch {
			reasons = append(reasons, r.Reason)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"replay 1 of 3 to sink (attempt 1)", "replay 1 of 3 to sink (attempt 2)"}
	if len(reasons) != len(want) || reasons[0] != want[0] || reasons[1] != want[1] {
		t.Fatalf("dispatch records say %q, want %q", reasons, want)
	}
}
