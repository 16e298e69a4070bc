package replay

import (
	"context"
	"net/http"
	"testing"
)

// Issue 15: a bulk replay during an outage reported the entries an open
// breaker held under their action's name ("auto_replay"), as if they had
// been replayed; they are "target unavailable", and nothing was sent.
func TestBulkReplayReportsBreakerHeldEntriesAsTargetUnavailable(t *testing.T) {
	b, _ := outage(t)
	b.sink.status = func(string, int) int { return http.StatusServiceUnavailable }
	bk := b.bulk(0, 0)
	bk.Reconciler.Breakers = &Breakers{Failures: 2, Clock: b.clock}
	rep, err := bk.ExecuteReplay(context.Background(), BulkFilter{Classes: []string{"transient"}})
	if err != nil {
		t.Fatal(err)
	}
	sent := len(b.sink.deliveries())
	if sent != 2 {
		t.Fatalf("%d deliveries, want 2 before the breaker opened", sent)
	}
	if rep.Replays[BulkTargetUnavailable] != 45-sent || rep.Replays["auto_replay"] != 0 {
		t.Fatalf("replays %v, want %d %q and none named auto_replay", rep.Replays, 45-sent, BulkTargetUnavailable)
	}
}
