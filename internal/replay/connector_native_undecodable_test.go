package replay

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

// TestLiveUndecodableQuarantinedOnceAsTheDLQDrains: a record of a live
// Cordum DLQ that replayctl cannot decode was named by its position on the
// gateway's page (URL#INDEX). Records ahead of it leave the DLQ between
// runs (replayed, deleted), so the next run found it at another index and
// quarantined it again under a new name: one record, one more quarantined
// entry per run, none ever cleaned. It is named by its job_id now, so two
// runs quarantine it once. The page is the gateway's: {"items",
// "next_cursor"}, next_cursor null on a short page (cordum-io/cordum
// core/controlplane/gateway/handlers_dlq.go:82-94 at 51b6141).
func TestLiveUndecodableQuarantinedOnceAsTheDLQDrains(t *testing.T) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	b := newBundle(t, baseRules)
	// Handled at the source (replay_status resolved): skipped, never
	// replayed; they only stand ahead of the bad record on run 1.
	ok := func(id string) string {
		return fmt.Sprintf(`{"job_id":%q,"topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason_code":"pool_overloaded","replay_status":"resolved","created_at":"2026-11-20T10:00:0%cZ"}`, id, id[len(id)-1])
	}
	bad := `{"job_id":"job_bad","topic":"tool.email.send","attempts":"four","created_at":"2026-11-20T09:00:00Z"}`
	var mu sync.Mutex
	items := []string{ok("job_1"), ok("job_2"), bad}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, `{"items":[%s],"next_cursor":null}`, strings.Join(items, ","))
	}))
	t.Cleanup(srv.Close)
	src, err := source.Parse("cordum:" + srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(2), src)
	mu.Lock()
	items = []string{bad} // job_1 and job_2 left the DLQ
	mu.Unlock()
	b.run(b.reconciler(2), src)

	var quarantined []string
	if err := b.store.Entries(context.Background(), func(er *store.EntryRecord) error {
		if er.Status == store.StatusQuarantined {
			quarantined = append(quarantined, er.Entry.Ref())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(quarantined) != 1 || quarantined[0] != "cordum:job_bad" {
		t.Fatalf("quarantined %v, want [cordum:job_bad] once", quarantined)
	}
}
