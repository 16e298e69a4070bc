package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/store"
)

// TestBrowserTickBarOnlyWherePending: review finding 2. The stale and
// expired views showed "Approve ticked / Reject ticked", decisions the
// server refuses for those requests; the bar is shown only where a
// pending request can be ticked, and those views keep Re-request.
func TestBrowserTickBarOnlyWherePending(t *testing.T) {
	chromium := requireChromium(t)
	f := newBrowserFixture(t, highRisk("h1"), highRisk("h2"), highRisk("h3"))
	if run := f.reconcile(t, "ops-bot"); run.Report.ApprovalsOpened != 3 {
		t.Fatalf("want 3 approval requests, got %d", run.Report.ApprovalsOpened)
	}
	// h1's request went stale, h2's expired; h3's is still pending.
	for ref, state := range map[string]string{"jsonl:h1": store.ApprovalStale, "jsonl:h2": store.ApprovalExpired} {
		if err := f.store.Update(context.Background(), func(tx store.Tx) error {
			er, err := tx.Entry(ref)
			if err != nil || er == nil {
				t.Fatalf("entry %s: %v", ref, err)
			}
			a, err := tx.Approval(er.ApprovalID)
			if err != nil || a == nil {
				t.Fatalf("approval of %s: %v", ref, err)
			}
			a.State = state
			return tx.PutApproval(a)
		}); err != nil {
			t.Fatal(err)
		}
	}
	base := f.http.URL
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	b.viewport(1280, 800)
	b.login(base, f.tokens["alice"])
	const bar = `String(document.querySelectorAll("#decide-many, #approve-many, #reject-many").length)`
	const rerequest = `String(document.querySelectorAll("#approvals article button.rerequest").length)`
	for _, v := range []struct {
		state, bar, rerequest string
	}{
		{"pending", "3", "0"},
		{"stale", "0", "1"},
		{"expired", "0", "1"},
	} {
		b.navigate(base + "/approvals?state=" + v.state)
		if n := b.eval(`String(document.querySelectorAll("#approvals article").length)`); n != "1" {
			b.fatalf("%s view: %s requests, want 1", v.state, n)
		}
		if n := b.eval(bar); n != v.bar {
			b.fatalf("%s view: %s parts of the Approve/Reject ticked bar, want %s", v.state, n, v.bar)
		}
		if n := b.eval(rerequest); n != v.rerequest {
			b.fatalf("%s view: %s Re-request buttons, want %s", v.state, n, v.rerequest)
		}
	}
}
