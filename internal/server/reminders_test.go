package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/notify"
	"github.com/replayctl/replayctl/internal/store"
)

// hookRecorder is an approver webhook that keeps every batch it gets.
type hookRecorder struct {
	*httptest.Server
	mu  sync.Mutex
	got []notify.Batch
}

func newHookRecorder(t *testing.T) *hookRecorder {
	h := &hookRecorder{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var b notify.Batch
		_ = json.Unmarshal(data, &b)
		h.mu.Lock()
		h.got = append(h.got, b)
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

// take returns the batches received since the last take.
func (h *hookRecorder) take() []notify.Batch {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.got
	h.got = nil
	return out
}

func remindedRecords(t *testing.T, st store.Backend) int {
	t.Helper()
	n := 0
	_ = audit.Each(context.Background(), st, audit.Query{Kind: audit.KindApproval}, func(r audit.Record) error {
		if r.Outcome == reminderOutcome {
			n++
		}
		return nil
	})
	return n
}

// Issue 19: approvers are told "when approvals are requested ... or age
// past a threshold". Two requests wait; once they pass an hour they are
// reminded of after a run, then once per half hour, each reminder audited.
// A restarted server reads the reminders from the audit trail, so it does
// not remind again inside the period; a decided request is not reminded of.
func TestAgingApprovalsAreRemindedOncePerPeriod(t *testing.T) {
	hook := newHookRecorder(t)
	clock := &tokenClock{now: time.Now()}
	n := &notify.Notifier{Hooks: []notify.Webhook{{URL: hook.URL, Format: "json"}}, Attempts: 1}
	b := newAPIBundle(t, []string{line("h1", "timeout", `,"labels":{"risk":"high"}`), line("h2", "timeout", `,"labels":{"risk":"high"}`), line("e1", "timeout", "")},
		func(c *Config) {
			c.Now = clock.Now
			c.Notify, c.PublicURL = n, "https://replayctl.example"
			c.Remind = notify.Aging{After: time.Hour, Every: 30 * time.Minute}
			c.Approvers.Expiry = 24 * time.Hour
		})
	step := func(d time.Duration) []notify.Batch {
		t.Helper()
		clock.advance(d)
		b.reconcile("operator")
		n.Wait()
		return hook.take()
	}
	if got := step(0); len(got) != 1 || got[0].Reason != "" || got[0].Requested != 2 {
		t.Fatalf("first run: %+v, want the one batch of 2 new requests", got)
	}
	// The run stamped the requests with the real time; the injected
	// clock takes over from a moment after it.
	clock.mu.Lock()
	clock.now = time.Now()
	clock.mu.Unlock()
	if got := step(59 * time.Minute); len(got) != 0 {
		t.Fatalf("at 59m: %+v, want nothing", got)
	}
	got := step(time.Minute)
	if len(got) != 1 || got[0].Reason != "aging" || got[0].Requested != 2 || got[0].OlderThan != "1h0m0s" ||
		got[0].Groups["platform-oncall"] != 2 || got[0].Link != "https://replayctl.example/approvals?state=pending" {
		t.Fatalf("at 1h: %+v, want one aging reminder of 2 platform-oncall requests", got)
	}
	if r := remindedRecords(t, b.store); r != 2 {
		t.Fatalf("%d reminder audit records, want 2", r)
	}
	if got := step(10 * time.Minute); len(got) != 0 {
		t.Fatalf("at 1h10m (inside the period): %+v, want nothing", got)
	}
	if got := step(20 * time.Minute); len(got) != 1 || got[0].Requested != 2 {
		t.Fatalf("at 1h30m: %+v, want the second reminder", got)
	}

	// A restart: the new server knows the last reminder from the audit.
	cfg := b.srv.cfg
	s2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(10 * time.Minute)
	if err := s2.remindAging(context.Background(), "run-after-restart"); err != nil {
		t.Fatal(err)
	}
	n.Wait()
	if got := hook.take(); len(got) != 0 {
		t.Fatalf("after a restart inside the period: %+v, want nothing", got)
	}

	// One request is decided; only the other is reminded of next.
	var list []store.Approval
	if code, body := b.do("GET", "/api/approvals?state=pending", "alice", ""); code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list) != 2 {
		t.Fatalf("pending approvals: %d %s", code, body)
	}
	if code, body := b.do("POST", "/api/approvals/"+list[0].ID+"/reject", "alice", `{"reason":"not now"}`); code != http.StatusOK {
		t.Fatalf("reject: %d %s", code, body)
	}
	clock.advance(20 * time.Minute)
	if err := s2.remindAging(context.Background(), "run-later"); err != nil {
		t.Fatal(err)
	}
	n.Wait()
	if got := hook.take(); len(got) != 1 || got[0].Requested != 1 {
		t.Fatalf("after one decision: %+v, want a reminder of the other request only", got)
	}
	if r := remindedRecords(t, b.store); r != 5 {
		t.Errorf("%d reminder audit records, want 5", r)
	}
}

// Due is a pure function of (now, requests, last reminders).
func TestAgingDue(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	w := []notify.Waiting{{ID: "young", RequestedAt: t0.Add(-30 * time.Minute)}, {ID: "old", RequestedAt: t0.Add(-3 * time.Hour)},
		{ID: "aged", RequestedAt: t0.Add(-time.Hour)}}
	a := notify.Aging{After: time.Hour}
	due := a.Due(t0, w, map[string]time.Time{"aged": t0.Add(-59 * time.Minute)})
	if len(due) != 1 || due[0].ID != "old" {
		t.Fatalf("due %+v, want only old (aged was reminded within Every = After)", due)
	}
	if due := (notify.Aging{}).Due(t0, w, nil); due != nil {
		t.Fatalf("reminders off, due %+v", due)
	}
	if due := a.Due(t0, w, nil); len(due) != 2 || due[0].ID != "old" || due[1].ID != "aged" {
		t.Fatalf("due %+v, want old then aged", due)
	}
}
