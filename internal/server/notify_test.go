package server

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

	"github.com/replayctl/replayctl/internal/notify"
)

// A run that opens approvals sends one batched notification with a link to
// the approval page; a webhook that keeps failing is metered.
func TestRunNotifiesApproversOncePerRun(t *testing.T) {
	var mu sync.Mutex
	var got []notify.Batch
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var b notify.Batch
		_ = json.Unmarshal(data, &b)
		mu.Lock()
		got = append(got, b)
		mu.Unlock()
	}))
	defer hook.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer broken.Close()

	b := newAPIBundle(t, []string{line("h1", "timeout", `,"labels":{"risk":"high"}`), line("h2", "timeout", `,"labels":{"risk":"high"}`), line("e1", "timeout", "")})
	n := &notify.Notifier{Hooks: []notify.Webhook{{URL: hook.URL, Format: "json"}, {URL: broken.URL, Format: "slack"}},
		Attempts: 2, Sleep: func(context.Context, time.Duration) {}}
	n.Failed = func(string) { b.srv.metrics.notifyFailed.Inc() }
	b.srv.cfg.Notify = n
	b.srv.cfg.PublicURL = "https://replayctl.example/"

	b.reconcile("operator")
	b.reconcile("operator") // nothing new: no second message
	n.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Requested != 2 || got[0].Link != "https://replayctl.example/approvals" || !strings.HasPrefix(got[0].Run, "run-") {
		t.Fatalf("notifications %+v, want one batch of 2 with the approval link", got)
	}
	if m := scrape(t, b); !strings.Contains(m, "replayctl_notifications_failed_total 1\n") {
		t.Fatal("the failing webhook was not metered")
	}
}
