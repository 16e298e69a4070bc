package server_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/store"
)

// offsetClock is the server's clock moved ahead of the real one by a set
// amount: approvals requested now expire on it without anyone waiting.
type offsetClock struct {
	mu sync.Mutex
	d  time.Duration
}

func (c *offsetClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.d) }
func (c *offsetClock) Skip(d time.Duration) {
	c.mu.Lock()
	c.d += d
	c.mu.Unlock()
}

func highRisk(id string) string {
	return fmt.Sprintf(`{"id":%q,"topic":"tool.email.send","reason_code":"timeout","attempts":3,"idempotency_key":"key-%s","labels":{"risk":"high"},"payload":{"to":"%s@example.com"}}`, id, id, id)
}

// TestBrowserApprovals1280: issue #18 "an approver approves from the
// queue without horizontal scrolling at 1280x800 (assert the button is in
// the viewport)"; filters by group and age; several approved at once,
// each checked on its own; one approved by keyboard alone; an expired
// request re-requested, with what changed since, and four-eyes kept.
func TestBrowserApprovals1280(t *testing.T) {
	chromium := requireChromium(t)
	clock := &offsetClock{}
	f := newBrowserFixtureWith(t, func(c *server.Config) { c.Now = clock.Now }, highRisk("h1"), highRisk("h2"), highRisk("h3"), highRisk("h4"))
	if run := f.reconcile(t, "ops-bot"); run.Report.ApprovalsOpened != 4 {
		t.Fatalf("want 4 approval requests, got %d", run.Report.ApprovalsOpened)
	}
	base := f.http.URL
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 90*time.Second)}
	b.viewport(1280, 800)
	b.login(base, f.tokens["alice"])
	b.navigate(base + "/approvals")
	b.shot("approvals-1280")
	inView := b.eval(`(() => { const el = document.querySelector("#approvals article button.approve"); if (!el) return "no button";
	  const r = el.getBoundingClientRect();
	  if (document.documentElement.scrollWidth > document.documentElement.clientWidth) return "page scrolls horizontally";
	  return (r.left >= 0 && r.top >= 0 && r.right <= innerWidth && r.bottom <= innerHeight) ? "ok" : "button at " + JSON.stringify(r); })()`)
	if inView != "ok" {
		b.fatalf("first Approve button at 1280x800: %s", inView)
	}
	if over := b.overflowing(); len(over) > 0 {
		b.fatalf("approvals at 1280 px overflow:\n%s", strings.Join(over, "\n"))
	}
	card := b.text("#approvals article")
	for _, want := range []string{"platform-oncall", "risk: high", "evidence", "timeout"} {
		if !strings.Contains(card, want) {
			b.fatalf("the request's card lacks %q:\n%s", want, card)
		}
	}

	// Filters: by group, and by time waiting.
	b.navigate(base + "/approvals?group=platform-oncall")
	if n := b.eval(`String(document.querySelectorAll("#approvals article").length)`); n != "4" {
		b.fatalf("group platform-oncall: %s requests, want 4", n)
	}
	b.navigate(base + "/approvals?older=1h")
	if n := b.eval(`String(document.querySelectorAll("#approvals article").length)`); n != "0" {
		b.fatalf("waiting over 1h: %s requests, want none yet", n)
	}

	// Several at once: tick two, approve them with one reason.
	b.navigate(base + "/approvals")
	ids := strings.Fields(b.eval(`Array.from(document.querySelectorAll("#approvals article")).map(a => a.id).join(" ")`))
	if len(ids) != 4 {
		b.fatalf("want 4 cards, got %v", ids)
	}
	b.do(chromedp.Click(chromedp.CSS(`input[name=id][value="`+ids[0]+`"]`)), chromedp.Click(chromedp.CSS(`input[name=id][value="`+ids[1]+`"]`)),
		chromedp.SendKeys(chromedp.CSS("#many-reason"), "customer confirmed both"))
	b.submit(chromedp.Click(chromedp.CSS("#approve-many")))
	for i, id := range ids[:3] { // the fourth is decided by keyboard below
		a := f.approvalRecord(t, id)
		want := store.ApprovalPending
		if i < 2 {
			want = store.ApprovalApproved
		}
		if a.State != want || (i < 2 && (a.DecidedBy != "alice" || a.Reason != "customer confirmed both")) {
			t.Fatalf("%s: %s by %q (%q), want %s", id, a.State, a.DecidedBy, a.Reason, want)
		}
	}
	if flash := b.text("#flash"); strings.Count(flash, "approved by alice") != 2 {
		b.fatalf("flash after approving two: %q", flash)
	}

	// By keyboard alone: Tab to the fourth request's Approve, Enter.
	b.tabTo("approve-"+ids[3], 80)
	b.submit(chromedp.KeyEvent("\r"))
	if flash := b.text("#flash"); !strings.Contains(flash, ids[3]+" approved by alice") {
		b.fatalf("keyboard approve: flash %q", flash)
	}
	if a := f.approvalRecord(t, ids[3]); a.State != store.ApprovalApproved {
		t.Fatalf("keyboard approve: %s is %s", ids[3], a.State)
	}

	// Two hours later the third has expired: shown so, with Re-request.
	clock.Skip(2 * time.Hour)
	b.login(base, f.tokens["alice"]) // the idle session ended too
	b.navigate(base + "/approvals?state=expired")
	if n := b.eval(`String(document.querySelectorAll("#approvals article").length)`); n != "1" {
		b.fatalf("expired: %s requests, want 1", n)
	}
	if b.exists("#approvals article button.approve") {
		b.fatalf("an expired request still offers Approve")
	}
	b.shot("approvals-expired")
	b.submit(chromedp.Click(chromedp.CSS(`article[id="` + ids[2] + `"] button.rerequest`)))
	if flash := b.text("#flash"); !strings.Contains(flash, "asked again as apr_") {
		b.fatalf("flash after re-request: %q", flash)
	}
	b.navigate(base + "/approvals?state=pending")
	if n := b.eval(`String(document.querySelectorAll("#approvals article").length)`); n != "1" {
		b.fatalf("after re-requesting one: %s pending, want 1", n)
	}
	// The new request says it was asked before, and what changed (nothing:
	// the same evidence, asked again).
	if prev := b.text("#approvals article .previous"); !strings.Contains(prev, ids[2]) || !strings.Contains(prev, "expired") {
		b.fatalf("the re-request's card reads %q, want the expired %s", prev, ids[2])
	}
	if ch := b.text("#approvals article .changed"); ch != "nothing in the decision" {
		b.fatalf("changed since: %q", ch)
	}

	// Four-eyes still holds per request: alice asked again, so another
	// approver must decide it; the console offers her no Approve on it
	// (issue 30), and the server refuses it all the same.
	newID := b.eval(`document.querySelector("#approvals article").id`)
	if b.exists("#approve-" + newID) {
		b.fatalf("alice is offered Approve on her own re-request %s", newID)
	}
	b.forgeForm("/approvals/"+newID+"/approve", nil)
	if flash := b.text("#flash"); !strings.Contains(flash, "four-eyes") {
		b.fatalf("approving one's own re-request: flash %q", flash)
	}
}
