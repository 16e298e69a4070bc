package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// One run's approvals become one POST per webhook (batched), a 5xx is
// retried with doubling backoff, Slack gets {"text"} with the link, and a
// webhook that hangs does not hold up Send (the run).
func TestBatchedRetriedNeverBlocking(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			w.WriteHeader(http.StatusBadGateway) // first attempt fails
			return
		}
		bodies = append(bodies, r.URL.Path+" "+string(data))
	}))
	defer srv.Close()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer hang.Close()
	defer close(release)

	var waits []time.Duration
	var failed []string
	n := &Notifier{
		Hooks:    []Webhook{{URL: srv.URL + "/generic", Format: "json"}, {URL: hang.URL, Format: "slack"}},
		Attempts: 3, Backoff: time.Second,
		Sleep:  func(_ context.Context, d time.Duration) { mu.Lock(); waits = append(waits, d); mu.Unlock() },
		Failed: func(h string) { mu.Lock(); failed = append(failed, h); mu.Unlock() },
	}
	done := make(chan struct{})
	go func() {
		n.Send(context.Background(), Batch{Run: "run-1", Requested: 12, Link: "https://replayctl.example/approvals"})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a generous bound: Send must return without waiting on any webhook
		t.Fatal("Send blocked on a hanging webhook")
	}
	// Wait for the generic hook's two attempts, not on a clock.
	for {
		mu.Lock()
		got := len(bodies)
		mu.Unlock()
		if got > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 || !strings.HasPrefix(bodies[0], "/generic ") {
		t.Fatalf("generic hook got %q, want one batched POST", bodies)
	}
	var b Batch
	if err := json.Unmarshal([]byte(strings.TrimPrefix(bodies[0], "/generic ")), &b); err != nil || b.Requested != 12 || b.Link == "" {
		t.Fatalf("generic payload %q: %v", bodies[0], err)
	}
	if len(waits) == 0 || waits[0] != time.Second {
		t.Fatalf("retry waits %v, want a 1s backoff before the retry", waits)
	}
}

func TestSlackPayloadAndFailureMetered(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		got = string(data)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	var waits []time.Duration
	var failed []string
	n := &Notifier{Hooks: []Webhook{{URL: srv.URL, Format: "slack"}}, Attempts: 3, Backoff: time.Second,
		Sleep:  func(_ context.Context, d time.Duration) { waits = append(waits, d) },
		Failed: func(h string) { failed = append(failed, h) }}
	n.Send(context.Background(), Batch{Run: "run-2", Requested: 1, Link: "https://r/approvals"})
	n.Wait()
	var msg map[string]string
	if err := json.Unmarshal([]byte(got), &msg); err != nil || !strings.Contains(msg["text"], "<https://r/approvals|") {
		t.Fatalf("slack payload %q", got)
	}
	if len(failed) != 1 || len(waits) != 2 || waits[1] != 2*time.Second {
		t.Fatalf("failed %v, waits %v: want one failure after 3 attempts with doubling backoff", failed, waits)
	}
	// No approvals, no message.
	n.Send(context.Background(), Batch{Run: "run-3"})
	n.Wait()
	if len(failed) != 1 {
		t.Fatal("an empty batch was sent")
	}
}
