package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

func transient(id string) string {
	return fmt.Sprintf(`{"id":%q,"topic":"tool.email.send","reason_code":"timeout","attempts":1,"idempotency_key":"key-%s","payload":{"n":%q}}`, id, id, id)
}

// outageFixture ingests n transient entries while the target is down, so
// they wait in manual review, then brings the (gated) target back.
func outageFixture(t *testing.T, n int) *browserFixture {
	t.Helper()
	var lines []string
	for i := range n {
		lines = append(lines, transient(fmt.Sprintf("r%02d", i)))
	}
	f := newBrowserFixture(t, lines...)
	f.gate = make(chan struct{})
	f.targetDown.Store(true)
	f.reconcile(t, "ops-bot")
	f.targetDown.Store(false)
	return f
}

// startBulkReplay replays every manual-review entry from the entries
// page and returns on the run's page.
func startBulkReplay(b *browserTab, base string, want int) {
	b.t.Helper()
	b.navigate(base + "/entries?state=manual_review")
	b.do(chromedp.Click(chromedp.CSS("#scope-matching")))
	b.submit(chromedp.Click(chromedp.CSS("#op-replay")))
	if w := b.text("#would"); w != fmt.Sprint(want) {
		b.fatalf("replay preview: would %s, want %d", w, want)
	}
	b.submit(chromedp.Click(chromedp.CSS("#execute")))
	if !strings.Contains(b.location(), "/runs/run-") {
		b.fatalf("after confirming the browser is on %s, want a run page", b.location())
	}
}

// TestBrowserRunProgress: issue #18 "a run's progress reaches done": the
// run page refreshes itself (no script) and shows each replay as the
// target takes it, then the run succeeded.
func TestBrowserRunProgress(t *testing.T) {
	chromium := requireChromium(t)
	f := outageFixture(t, 3)
	base := f.http.URL
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 90*time.Second)}
	b.login(base, f.tokens["ops-bot"])
	startBulkReplay(b, base, 3)
	if st := b.text("#run-state"); st != "running" {
		b.fatalf("the run is %s before the target answered", st)
	}
	for i := 1; i <= 3; i++ {
		f.gate <- struct{}{} // the target takes one replay
		// The test does not reload: the page's own refresh shows it.
		if !b.waitFor(fmt.Sprintf(`(document.getElementById("done")||{}).textContent === "%d"`, i), 20*time.Second) {
			b.fatalf("progress never showed %d of 3", i)
		}
		if i == 1 {
			b.shot("run-progress")
		}
	}
	if !b.waitFor(`(document.getElementById("run-state")||{}).textContent === "succeeded"`, 20*time.Second) {
		b.fatalf("the run did not reach succeeded")
	}
	if p := b.eval(`String(document.getElementById("progress").value) + "/" + document.getElementById("progress").max`); p != "3/3" {
		b.fatalf("progress bar at %s, want 3/3", p)
	}
	if b.exists("#cancel") {
		b.fatalf("a finished run offers Cancel")
	}
	for i := range 3 {
		if n := f.deliveries(fmt.Sprintf("key-r%02d", i)); n != 1 {
			t.Fatalf("r%02d delivered %d times", i, n)
		}
	}
	b.navigate(base + "/runs")
	if !strings.Contains(b.text("#runs"), "bulk-replay") {
		b.fatalf("the runs list lacks the bulk replay")
	}
}

// TestBrowserRunCancel: issue #18 "cancel stops it": Cancel while the
// first replay is in flight; that replay finishes and is recorded, none
// of the others is sent, and the run ends cancelled.
func TestBrowserRunCancel(t *testing.T) {
	chromium := requireChromium(t)
	f := outageFixture(t, 10)
	base := f.http.URL
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 90*time.Second)}
	b.login(base, f.tokens["ops-bot"])
	startBulkReplay(b, base, 10)
	// Cancel once the first replay is at the target (in flight).
	for deadline := time.Now().Add(20 * time.Second); f.held.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no replay reached the target")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.submit(chromedp.Click(chromedp.CSS("#cancel")))
	if flash := b.text("#flash"); !strings.Contains(flash, "cancel requested by ops-bot") {
		b.fatalf("flash after cancel: %q", flash)
	}
	close(f.gate) // the target answers whatever is in flight
	if !b.waitFor(`(document.getElementById("run-state")||{}).textContent === "cancelled"`, 20*time.Second) {
		b.fatalf("the run did not end cancelled")
	}
	b.shot("run-cancelled")
	// The bulk dispatches up to MaxParallel at once: every replay that was
	// at the target when Cancel came finishes and is recorded; none after.
	sent := 0
	for i := range 10 {
		ref, n := fmt.Sprintf("jsonl:r%02d", i), f.deliveries(fmt.Sprintf("key-r%02d", i))
		sent += n
		if st := f.entryStatus(t, ref); n == 1 && st != "replayed" || n == 0 && st != "manual_review" || n > 1 {
			t.Fatalf("%s delivered %d times and is %s", ref, n, st)
		}
	}
	if held := int(f.held.Load()); sent == 0 || sent != held || sent >= 10 {
		t.Fatalf("%d replays delivered, %d were in flight at the cancel: want those in flight only", sent, held)
	}
	if b.exists("#run-error") {
		b.fatalf("cancelled run reports an error: %s", b.text("#run-error"))
	}
	if by := b.text("#cancelled-by"); by != "cancelled by ops-bot" {
		b.fatalf("run page says %q", by)
	}
	b.navigate(base + "/entries?state=manual_review")
	if n := b.text("#total-n"); n != fmt.Sprint(10-sent) {
		b.fatalf("after cancel %s entries wait in manual review, want the %d never sent", n, 10-sent)
	}
}
