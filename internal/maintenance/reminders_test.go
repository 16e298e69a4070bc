package maintenance_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/maintenance"
	"github.com/replayctl/replayctl/internal/notify"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// The approval-reminders duty reminds approvers of a request pending past
// --notify-aging on its tick, with no run at all (before, a reminder went
// out only after a run); the server's own bookkeeping keeps it to once per
// period, and the duty's rounds show in /metrics.
func TestRemindersDutyRemindsWithoutARun(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("version: v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(dir, "replayctl.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	if err := st.Update(ctx, func(tx store.Tx) error {
		return tx.PutApproval(&store.Approval{ID: "ap1", EntryRef: "jsonl:e1", EntryID: "e1", Key: "k1",
			ApproverGroup: "platform-oncall", State: store.ApprovalPending, RequestedBy: "replayctl",
			RequestedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(22 * time.Hour)})
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []notify.Batch
	hook := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var b notify.Batch
		_ = json.Unmarshal(data, &b)
		mu.Lock()
		got = append(got, b)
		mu.Unlock()
	}))
	defer hook.Close()
	n := &notify.Notifier{Hooks: []notify.Webhook{{URL: hook.URL, Format: "json"}}, Attempts: 1}
	group := maintenance.NewGroup(nil)
	srv, err := server.New(server.Config{Store: st, Notify: n, PublicURL: "https://replayctl.example",
		Remind: notify.Aging{After: time.Hour, Every: time.Hour}, Maintenance: group, ConfigFiles: []string{rules},
		Engine: func(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
			return policy.LoadEngine(ctx, rules, "../../policies", 0)
		}})
	if err != nil {
		t.Fatal(err)
	}
	ticks := make(chan time.Time)
	tickStopped := make(chan struct{})
	p, err := maintenance.NewReminders(srv.RemindAging, maintenance.Options{Every: time.Minute,
		Tick: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() { close(tickStopped) } }})
	if err != nil {
		t.Fatal(err)
	}
	group.Add(p)
	before := runtime.NumGoroutine()
	if err := group.Start(ctx); err != nil {
		t.Fatal(err)
	}
	round := func(n uint64) {
		t.Helper()
		ticks <- time.Now()
		deadline := time.Now().Add(30 * time.Second)
		for s := p.Status(); s.Runs < n || s.Running; s = p.Status() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d did not end: %+v", n, s)
			}
			time.Sleep(time.Millisecond)
		}
		if s := p.Status(); s.Errors != 0 {
			t.Fatalf("reminder round failed: %+v", s)
		}
	}
	round(1)
	round(2) // inside the period: nothing more
	n.Wait()
	mu.Lock()
	if len(got) != 1 || got[0].Reason != "aging" || got[0].Requested != 1 || got[0].Groups["platform-oncall"] != 1 {
		t.Fatalf("webhook got %+v, want one aging reminder of one request", got)
	}
	mu.Unlock()
	reminded := 0
	if err := audit.Each(ctx, st, audit.Query{Kind: audit.KindApproval}, func(r audit.Record) error {
		if r.Outcome == "reminded" {
			reminded++
		}
		return nil
	}); err != nil || reminded != 1 {
		t.Fatalf("%d reminder audit records (%v), want 1", reminded, err)
	}

	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`replayctl_maintenance_runs_total{service="approval-reminders"} 2`,
		`replayctl_maintenance_errors_total{service="approval-reminders"} 0`,
		`replayctl_maintenance_last_run_timestamp_seconds{service="approval-reminders"}`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var ready map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &ready); err != nil || ready["maintenance"] != "ok" {
		t.Fatalf("/readyz: %s %v", rec.Body, err)
	}
	group.Stop()
	<-tickStopped
	// The webhook's keep-alive connection is the notifier's, not the duty's.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	hook.CloseClientConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after stop, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
}
