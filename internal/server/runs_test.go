package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/runs"
)

// Issue 15: a bulk replay is a run with an id that can be followed
// (GET /api/runs, /api/runs/{id}: total, done, succeeded, ...) and
// cancelled (POST /api/runs/{id}/cancel, operator): no new dispatch
// starts; the one in flight records its outcome.
func TestBulkRunCanBeFollowedAndCancelled(t *testing.T) {
	var entries []string
	for i := range 40 {
		entries = append(entries, line(fmt.Sprintf("c%02d", i), "timeout", ""))
	}
	b := newAPIBundle(t, entries)
	b.noTarget = true
	b.reconcile("operator") // ingest only: nowhere to send
	b.noTarget = false
	b.mu.Lock()
	b.hang = 20 * time.Millisecond // a slow target, so the run is still going when cancelled
	b.mu.Unlock()

	code, body := b.do("POST", "/api/dead-letters/replay", "operator", `{"filter":{"reason_code":["timeout"]}}`)
	if code != http.StatusAccepted {
		t.Fatalf("start: %d %s", code, body)
	}
	var started struct{ ID string }
	_ = json.Unmarshal([]byte(body), &started)

	get := func() Run {
		t.Helper()
		code, body := b.do("GET", "/api/runs/"+started.ID, "viewer", "")
		var run Run
		if code != http.StatusOK || json.Unmarshal([]byte(body), &run) != nil {
			t.Fatalf("GET run: %d %s", code, body)
		}
		return run
	}
	deadline := time.Now().Add(20 * time.Second)
	for run := get(); run.Done < 3; run = get() {
		if run.State != runs.Running || time.Now().After(deadline) {
			t.Fatalf("run did not progress: %+v", run.Record)
		}
		time.Sleep(5 * time.Millisecond) // polling the API, as a client does
	}
	if code, body := b.do("POST", "/api/runs/"+started.ID+"/cancel", "viewer", ""); code != http.StatusForbidden {
		t.Fatalf("viewer cancel: %d %s", code, body)
	}
	if code, body := b.do("POST", "/api/runs/"+started.ID+"/cancel", "operator", ""); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, body)
	}
	b.srv.Wait()
	run := get()
	if run.State != runs.Cancelled || run.CancelledBy != "operator" || run.Total != 40 || run.Done >= 40 || run.Bulk == nil || run.Bulk.Stopped == "" {
		t.Fatalf("after cancel: %+v (bulk %+v)", run.Record, run.Bulk)
	}
	// Every dispatch that started has its outcome: what the target got is
	// what the run counts as succeeded.
	b.mu.Lock()
	sent := len(b.got)
	b.mu.Unlock()
	if sent != run.Succeeded || sent == 0 {
		t.Fatalf("target got %d keys, run counts %d succeeded", sent, run.Succeeded)
	}
	if code, _ := b.do("POST", "/api/runs/"+started.ID+"/cancel", "operator", ""); code != http.StatusConflict {
		t.Fatalf("second cancel: %d", code)
	}
	if code, _ := b.do("POST", "/api/runs/run-nope/cancel", "operator", ""); code != http.StatusNotFound {
		t.Fatalf("unknown run cancel: %d", code)
	}
	code, body = b.do("GET", "/api/runs", "viewer", "")
	var list struct{ Items []runs.Record }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list.Items) != 2 || list.Items[0].ID != started.ID {
		t.Fatalf("list: %d %s", code, body)
	}
}

// A run recorded as running by a process that is gone (killed mid-run)
// must not show as running forever: with a bbolt file only the serving
// process can own runs, so any other is shown interrupted, with why, and
// a cancel of it is refused (409) rather than waiting for nobody.
func TestRunOfAGoneProcessIsShownInterrupted(t *testing.T) {
	b := newAPIBundle(t, []string{line("t1", "timeout", "")})
	ctx := context.Background()
	// What a `dlq replay --filter` killed mid-run leaves behind.
	tr, _, err := runs.Start(ctx, b.store, runs.Options{Op: "bulk-replay", Actor: "alice", Owner: "replayctl pid 4242", Total: 10})
	if err != nil {
		t.Fatal(err)
	}
	tr.Observe(ctx, runs.Success)
	code, body := b.do("GET", "/api/runs/"+tr.ID(), "viewer", "")
	var run Run
	if code != http.StatusOK || json.Unmarshal([]byte(body), &run) != nil || run.State != runs.Interrupted ||
		!strings.Contains(run.Error, "replayctl pid 4242") {
		t.Fatalf("GET: %d %s", code, body)
	}
	code, body = b.do("GET", "/api/runs", "viewer", "")
	if code != http.StatusOK || !strings.Contains(body, `"state":"interrupted"`) || strings.Contains(body, `"state":"running"`) {
		t.Fatalf("list: %d %s", code, body)
	}
	if code, body := b.do("POST", "/api/runs/"+tr.ID()+"/cancel", "operator", ""); code != http.StatusConflict {
		t.Fatalf("cancel: %d %s", code, body)
	}
}
