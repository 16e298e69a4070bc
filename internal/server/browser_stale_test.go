package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayctl/replayctl/internal/store"
)

// TestBrowserApprovalsStaleRerequest: issue #18 "stale and expired
// requests shown with a re-request button". Two requests go stale (their
// entries' labels changed after they were asked, so approving them is
// refused as stale); each shows Re-request. Re-requesting one whose entry
// still needs an approval opens a new request on the current evidence;
// one whose entry no longer does (the high-risk label is gone) is refused
// and nothing is replayed.
func TestBrowserApprovalsStaleRerequest(t *testing.T) {
	chromium := requireChromium(t)
	f := newBrowserFixture(t, highRisk("h1"), highRisk("h2"))
	if run := f.reconcile(t, "ops-bot"); run.Report.ApprovalsOpened != 2 {
		t.Fatalf("want 2 approval requests, got %d", run.Report.ApprovalsOpened)
	}
	ask := map[string]string{}
	relabel := func(ref string, labels map[string]string) {
		t.Helper()
		if err := f.store.Update(context.Background(), func(tx store.Tx) error {
			er, err := tx.Entry(ref)
			if err != nil || er == nil {
				t.Fatalf("entry %s: %v", ref, err)
			}
			ask[ref] = er.ApprovalID
			er.Entry.Labels = labels
			return tx.PutEntry(er)
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The source now says h1 belongs to payments (still high risk), and h2
	// is no longer high risk.
	relabel("jsonl:h1", map[string]string{"risk": "high", "owner": "payments"})
	relabel("jsonl:h2", map[string]string{"owner": "payments"})
	base := f.http.URL
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	b.viewport(1280, 800)
	b.login(base, f.tokens["alice"])
	for _, ref := range []string{"jsonl:h1", "jsonl:h2"} {
		b.navigate(base + "/approvals")
		b.submit(chromedp.Click(chromedp.CSS("#approve-" + ask[ref])))
		if flash := b.text("#flash"); !strings.Contains(flash, "stale") {
			b.fatalf("approving %s after its entry changed: flash %q", ref, flash)
		}
	}
	b.navigate(base + "/approvals?state=stale")
	if n := b.eval(`String(document.querySelectorAll("#approvals article button.rerequest").length)`); n != "2" {
		b.fatalf("stale requests with Re-request: %s, want 2", n)
	}
	b.shot("approvals-stale")

	b.submit(chromedp.Click(chromedp.CSS(`article[id="` + ask["jsonl:h1"] + `"] button.rerequest`)))
	flash := b.text("#flash")
	if !strings.Contains(flash, "asked again as apr_") || !strings.Contains(flash, "current evidence") {
		b.fatalf("re-requesting h1: flash %q", flash)
	}
	newID := f.approvalRecord(t, ask["jsonl:h1"]).ID
	var er *store.EntryRecord
	if err := f.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		er, err = tx.Entry("jsonl:h1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if er.ApprovalID == newID || er.Status != store.StatusAwaitingApproval {
		t.Fatalf("h1 after the re-request: %s, request %s (the stale one was %s)", er.Status, er.ApprovalID, newID)
	}
	na := f.approvalRecord(t, er.ApprovalID)
	if na.State != store.ApprovalPending || na.RequestedBy != "alice" || na.Evidence == f.approvalRecord(t, newID).Evidence {
		t.Fatalf("the new request: %s by %s on %s", na.State, na.RequestedBy, na.Evidence)
	}
	b.navigate(base + "/approvals?state=pending")
	if got := b.eval(`Array.from(document.querySelectorAll("#approvals article")).map(a => a.id).join(",")`); got != na.ID {
		b.fatalf("pending after re-requesting h1: %s, want %s", got, na.ID)
	}
	b.shot("approvals-stale-rerequested")

	b.navigate(base + "/approvals?state=stale")
	b.submit(chromedp.Click(chromedp.CSS(`article[id="` + ask["jsonl:h2"] + `"] button.rerequest`)))
	if flash := b.text("#flash"); !strings.Contains(flash, "not done") || !strings.Contains(flash, "not an approval") {
		b.fatalf("re-requesting h2, which no longer needs an approval: flash %q", flash)
	}
	if st := f.entryStatus(t, "jsonl:h2"); st != store.StatusAwaitingApproval {
		t.Fatalf("h2 after a refused re-request: %s, want it left as it was", st)
	}
	if n := f.deliveries("key-h2"); n != 0 {
		t.Fatalf("h2 was dispatched %d times by a re-request", n)
	}
}
