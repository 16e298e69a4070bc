package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayctl/replayctl/internal/store"
)

// TestBrowserEntryPage: issue #18 "an entry's payload and timeline
// render": the payload pretty-printed, collapsible and cut at 64 KiB, the
// labels, the ledger, the timeline with the decision's reasons; action
// buttons only for operators, and a release from the page is recorded.
func TestBrowserEntryPage(t *testing.T) {
	chromium := requireChromium(t)
	big := strings.Repeat("y", 70<<10)
	f := newBrowserFixture(t,
		`{"id":"q1","topic":"tool.alpha.send","reason_code":"schema_invalid","message":"field amount missing","attempts":2,"idempotency_key":"kq1","labels":{"team":"alpha","tier":"gold"},"payload":{"order":{"id":17,"lines":[1,2]}}}`,
		fmt.Sprintf(`{"id":"big","topic":"tool.alpha.send","reason_code":"schema_invalid","attempts":1,"idempotency_key":"kbig","payload":{"blob":%q}}`, big))
	f.reconcile(t, "ops-bot")
	base := f.http.URL

	// A viewer reads everything and is offered no action.
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	b.login(base, f.tokens["carol"])
	b.navigate(base + "/entries/jsonl:q1")
	if b.exists("#act-replay") || b.exists("#act-resolve") || b.exists("#act-release") {
		b.fatalf("a viewer is offered entry actions")
	}
	payload := b.eval(`document.getElementById("payload").textContent`)
	if !strings.Contains(payload, "\n  \"order\": {\n    \"id\": 17,") {
		b.fatalf("payload is not pretty-printed:\n%s", payload)
	}
	if labels := b.text("#labels"); !strings.Contains(labels, "team=alpha") || !strings.Contains(labels, "tier=gold") {
		b.fatalf("labels read %q", labels)
	}
	if l := b.text("#ledger"); !strings.Contains(l, "0 replay(s)") {
		b.fatalf("ledger reads %q", l)
	}
	tl := b.text("#timeline")
	if !strings.Contains(tl, "decision") || !strings.Contains(tl, "ops-bot") || !strings.Contains(tl, "schema_invalid") {
		b.fatalf("timeline lacks the decision and its reasons:\n%s", tl)
	}
	// Collapsible: closing the details hides the payload.
	b.do(chromedp.Click(chromedp.CSS("#payload-box summary")))
	if vis := b.eval(`String(document.getElementById("payload").checkVisibility())`); vis != "false" {
		b.fatalf("payload still visible after collapsing: %s", vis)
	}
	// Size cap: a 70 KiB payload shows 64 KiB and says so.
	b.navigate(base + "/entries/jsonl:big")
	if n := b.eval(`String(document.getElementById("payload").textContent.length)`); n != fmt.Sprint(64<<10) || !b.exists("#payload-cut") {
		b.fatalf("70 KiB payload shown as %s characters (want 65536) with a cut notice %v", n, b.exists("#payload-cut"))
	}

	// An operator releases the quarantined entry from its page.
	op := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	op.login(base, f.tokens["ops-bot"])
	op.navigate(base + "/entries/jsonl:q1")
	if op.exists("#act-replay") || !op.exists("#act-resolve") || !op.exists("#act-release") {
		op.fatalf("an operator is not offered resolve and release (and no replay) on a quarantined entry")
	}
	if why := op.text("#no-replay"); !strings.Contains(why, "quarantined") {
		op.fatalf("the page does not say why it offers no replay: %q", why)
	}
	op.shot("entry-1280")
	op.do(chromedp.SendKeys(chromedp.CSS(`form[action$="/release"] input[name=reason]`), "schema fixed upstream"))
	op.submit(chromedp.Click(chromedp.CSS("#act-release")))
	if flash := op.text("#flash"); !strings.Contains(flash, "released by ops-bot") {
		op.fatalf("flash after release: %q", flash)
	}
	if s := f.entryStatus(t, "jsonl:q1"); s != store.StatusPending {
		t.Fatalf("q1 is %s after release, want pending", s)
	}
	if tl := op.text("#timeline"); !strings.Contains(tl, "release") || !strings.Contains(tl, "schema fixed upstream") {
		op.fatalf("timeline lacks the release and its reason:\n%s", tl)
	}
	if st := op.text("#status"); !strings.Contains(st, "pending") {
		op.fatalf("status reads %q after release", st)
	}
}

// TestBrowserEntryReplayOffer: issue #30 "Replay now is offered only when
// replaying can do something, says what it costs, and a refusal is styled
// as an error". The offer is the bulk preview's decision for the entry.
func TestBrowserEntryReplayOffer(t *testing.T) {
	chromium := requireChromium(t)
	f := newBrowserFixture(t,
		`{"id":"t1","topic":"tool.alpha.send","reason_code":"max_scheduling_retries","attempts":1,"idempotency_key":"kt1","payload":{}}`,
		`{"id":"u1","topic":"tool.alpha.send","reason_code":"unknown_commit_state","attempts":1,"idempotency_key":"ku1","payload":{}}`)
	f.targetDown.Store(true) // no route: t1 goes to manual review unsent
	f.reconcile(t, "ops-bot")
	base := f.http.URL
	op := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	op.login(base, f.tokens["ops-bot"])

	op.navigate(base + "/entries/jsonl:u1")
	if op.exists("#act-replay") {
		op.fatalf("Replay now offered on an unknown_commit entry that a replay sends to a person")
	}
	op.navigate(base + "/entries/jsonl:t1")
	if op.exists("#act-replay") {
		op.fatalf("Replay now offered while the entry has no target")
	}
	f.targetDown.Store(false)
	op.navigate(base + "/entries/jsonl:t1")
	if !op.exists("#act-replay") {
		op.fatalf("Replay now not offered on a replayable entry: %q", op.text(".actions"))
	}
	if c := op.text("#replay-cost"); c != "uses replay 1 of 2" {
		op.fatalf("cost reads %q, want %q", c, "uses replay 1 of 2")
	}
	// The target goes away between the page and the click: the refusal
	// is an error, not the success banner.
	f.targetDown.Store(true)
	op.submit(chromedp.Click(chromedp.CSS("#act-replay")))
	if !op.exists("#flash.err") || op.exists("#flash.flash") {
		op.fatalf("refusal not styled as an error: %q", op.eval(`document.getElementById("flash").outerHTML`))
	}
	if n := f.deliveries("kt1"); n != 0 {
		t.Fatalf("kt1 delivered %d times, want 0", n)
	}
	// Issue #30: a success is not reported as an error: the flash and the
	// ledger line call the target's 200 its answer, not a "last error".
	f.targetDown.Store(false)
	op.navigate(base + "/entries/jsonl:t1")
	op.submit(chromedp.Click(chromedp.CSS("#act-replay")))
	if flash := op.text("#flash"); !strings.Contains(flash, "succeeded") || !strings.Contains(flash, "the target answered") {
		op.fatalf("flash after a delivered replay: %q", flash)
	}
	if l := op.text("#ledger"); strings.Contains(l, "last error") || !strings.Contains(l, "the target answered") {
		op.fatalf("ledger line after a success reads %q", l)
	}
	if n := f.deliveries("kt1"); n != 1 {
		t.Fatalf("kt1 delivered %d times, want 1", n)
	}
}
