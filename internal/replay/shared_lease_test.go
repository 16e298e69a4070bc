package replay

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/source"
)

// In a window an entry's intent is durable before it has a place to send,
// and it may wait there behind other dispatches: longer, here, than its
// lease. Found in review: with --max-parallel 1, a 1.5 s lease and a target
// taking 600 ms, 6 of 8 claims went stale while waiting, their requests
// still went out, and their successes were left outcome_unknown or
// dispatching for a person. The lease is now renewed under the claim's
// token while the entry waits and before it is sent.
func TestSharedWindowKeepsTheLeaseWhileAnEntryWaitsToSend(t *testing.T) {
	b, pg := sharedBundle(t)
	var entries []map[string]any
	for i := range 8 {
		entries = append(entries, transient(fmt.Sprintf("e%03d", i), fmt.Sprintf("k%03d", i)))
	}
	src := b.jsonl("dlq.jsonl", entries...)
	b.sink.hang = 600 * time.Millisecond
	r := b.worker(pg, "w0")
	r.MaxParallel = 1 // a window of 4 entries, one sending at a time
	r.Lease = 1500 * time.Millisecond
	rep, err := r.Run(context.Background(), []source.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	if rep.StaleClaims != 0 || rep.Replays.Succeeded != 8 {
		t.Fatalf("stale claims %d, succeeded %d; want 0 and 8", rep.StaleClaims, rep.Replays.Succeeded)
	}
	for i := range 8 {
		k := fmt.Sprintf("k%03d", i)
		if v, _ := pg.LedgerView(context.Background(), k); v.State != string(idempotency.Succeeded) {
			t.Errorf("%s: %s, want succeeded", k, v.State)
		}
		if n := b.sink.perKey()[k]; n != 1 {
			t.Errorf("%s delivered %d times", k, n)
		}
	}
}
