package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// consoleEntries are 15 alpha and 10 beta entries the bundled rules
// quarantine (schema_invalid -> quarantine, rules.yaml), so they stay open
// after a reconcile, plus two transient ones the sink takes.
func consoleEntries() []string {
	var lines []string
	for i := range 15 {
		lines = append(lines, fmt.Sprintf(`{"id":"a%02d","topic":"tool.alpha.send","reason_code":"schema_invalid","message":"field amount missing in order %d","attempts":1,"idempotency_key":"ka-%02d","labels":{"team":"alpha"},"payload":{"order":%d}}`, i, i, i, i))
	}
	for i := range 10 {
		lines = append(lines, fmt.Sprintf(`{"id":"b%02d","topic":"tool.beta.send","reason_code":"schema_invalid","message":"bad enum","attempts":1,"idempotency_key":"kb-%02d","labels":{"team":"beta"},"payload":{"n":%d}}`, i, i, i))
	}
	return lines
}

func (f *browserFixture) entryStatus(t *testing.T, ref string) string {
	t.Helper()
	var er *store.EntryRecord
	if err := f.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		er, err = tx.Entry(ref)
		return err
	}); err != nil || er == nil {
		t.Fatalf("entry %s: %v (nil %v)", ref, err, er == nil)
	}
	return er.Status
}

// TestBrowserEntriesBulkAllMatching: issue #18
// "search and filter narrow the list as expected; a bulk action on 'all
// matching' acts on entries beyond the first page".
func TestBrowserEntriesBulkAllMatching(t *testing.T) {
	chromium := requireChromium(t)
	f := newBrowserFixture(t, consoleEntries()...)
	f.reconcile(t, "ops-bot")
	if s := f.entryStatus(t, "jsonl:a14"); s != store.StatusQuarantined {
		t.Fatalf("fixture: a14 is %s, want quarantined", s)
	}
	base := f.http.URL
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 90*time.Second)}
	b.login(base, f.tokens["ops-bot"])

	// Search, by keyboard: Tab to the search box, type a key, Enter.
	b.navigate(base + "/entries")
	if n := b.text("#total-n"); n != "25" {
		b.fatalf("unfiltered list: %s entries, want 25", n)
	}
	b.tabTo("q", 20)
	b.submit(chromedp.KeyEvent("ka-07\r"))
	if n := b.text("#total-n"); n != "1" || !b.exists(`a[href="/entries/jsonl:a07"]`) {
		b.fatalf("search ka-07: %s entries, want only jsonl:a07", n)
	}
	// Search the message text.
	b.navigate(base + "/entries?q=" + "order+12")
	if n := b.text("#total-n"); n != "1" || !b.exists(`a[href="/entries/jsonl:a12"]`) {
		b.fatalf("search 'order 12': %s entries, want jsonl:a12", n)
	}

	// Filter by topic glob through the form, ten a page: 15 match, two pages.
	b.navigate(base + "/entries?size=10")
	b.do(chromedp.SendKeys(chromedp.CSS("#f-topic"), "tool.alpha.*"))
	b.submit(chromedp.Click(chromedp.CSS("#apply")))
	if n := b.text("#total-n"); n != "15" {
		b.fatalf("topic tool.alpha.*: %s entries, want 15", n)
	}
	rows := b.eval(`String(document.querySelectorAll("#entries tbody tr").length)`)
	if rows != "10" || !b.exists("#next") || b.exists(`a[href="/entries/jsonl:a14"]`) {
		b.fatalf("page 1 of the alpha filter: %s rows (want 10), next link %v", rows, b.exists("#next"))
	}
	// Label and state filters narrow too.
	b.navigate(base + "/entries?label=team%3Dbeta&state=quarantined")
	if n := b.text("#total-n"); n != "10" {
		b.fatalf("label team=beta: %s entries, want 10", n)
	}
	b.navigate(base + "/entries?topic=tool.alpha.*&size=10")
	b.shot("entries-page1")

	// All matching -> preview lists all 15 (page 2's included) -> confirm.
	b.do(chromedp.Click(chromedp.CSS("#scope-matching")))
	b.submit(chromedp.Click(chromedp.CSS("#op-resolve")))
	if w := b.text("#would"); w != "15" || !b.exists(`#items a[href="/entries/jsonl:a14"]`) || b.exists(`#items a[href="/entries/jsonl:b00"]`) {
		b.fatalf("resolve preview: would %s (want 15, with a14 and no beta entry)", w)
	}
	if s := f.entryStatus(t, "jsonl:a14"); s != store.StatusQuarantined {
		t.Fatalf("the preview changed a14 to %s", s)
	}
	b.shot("resolve-preview")
	b.do(chromedp.SendKeys(chromedp.CSS("#reason"), "fixed upstream schema; orders re-sent by billing"))
	b.submit(chromedp.Click(chromedp.CSS("#execute")))
	if !strings.Contains(b.location(), "/runs/run-") {
		b.fatalf("after confirming, the browser is on %s, want the run's page", b.location())
	}
	if !b.waitFor(`(document.getElementById("run-state")||{}).textContent === "succeeded"`, 30*time.Second) {
		b.fatalf("the bulk resolve run did not succeed")
	}
	b.shot("resolve-run")
	for i := range 15 {
		if s := f.entryStatus(t, fmt.Sprintf("jsonl:a%02d", i)); s != store.StatusResolved {
			t.Fatalf("a%02d is %s after resolving all matching, want resolved", i, s)
		}
	}
	for i := range 10 {
		if s := f.entryStatus(t, fmt.Sprintf("jsonl:b%02d", i)); s != store.StatusQuarantined {
			t.Fatalf("b%02d is %s: the filter did not hold", i, s)
		}
	}
	// The same audit as the CLI: one bulk record plus one resolve per entry, by ops-bot.
	var resolves, bulk int
	if err := audit.Each(context.Background(), f.store, audit.Query{Actor: "ops-bot"}, func(r audit.Record) error {
		switch r.Kind {
		case audit.KindResolve:
			resolves++
		}
		if strings.HasPrefix(string(r.Kind), "bulk") {
			bulk++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if resolves != 15 || bulk == 0 {
		t.Fatalf("audit by ops-bot: %d resolves (want 15), %d bulk records (want some)", resolves, bulk)
	}

	// Selected entries only: tick two beta entries and release them.
	b.navigate(base + "/entries?topic=tool.beta.*")
	b.do(chromedp.Click(chromedp.CSS(`input[name=id][value="jsonl:b03"]`)), chromedp.Click(chromedp.CSS(`input[name=id][value="jsonl:b07"]`)))
	b.submit(chromedp.Click(chromedp.CSS("#op-release")))
	if w := b.text("#would"); w != "2" {
		b.fatalf("release preview of two ticked entries: would %s", w)
	}
	b.do(chromedp.SendKeys(chromedp.CSS("#reason"), "schema fixed for these two"))
	b.submit(chromedp.Click(chromedp.CSS("#execute")))
	if !b.waitFor(`(document.getElementById("run-state")||{}).textContent === "succeeded"`, 30*time.Second) {
		b.fatalf("the release run did not succeed")
	}
	for _, id := range []string{"b03", "b07"} {
		if s := f.entryStatus(t, "jsonl:"+id); s != store.StatusPending {
			t.Fatalf("%s is %s after release, want pending", id, s)
		}
	}
	if s := f.entryStatus(t, "jsonl:b04"); s != store.StatusQuarantined {
		t.Fatalf("b04 (not ticked) is %s", s)
	}
}

// TestBrowserEntriesViewer: buttons only for roles allowed;
// the server refuses the action anyway.
func TestBrowserEntriesViewer(t *testing.T) {
	chromium := requireChromium(t)
	f := newBrowserFixture(t, consoleEntries()[:3]...)
	f.reconcile(t, "ops-bot")
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	b.login(f.http.URL, f.tokens["carol"])
	b.navigate(f.http.URL + "/entries")
	if n := b.text("#total-n"); n != "3" {
		b.fatalf("viewer's list: %s entries", n)
	}
	for _, sel := range []string{"#op-replay", "#op-resolve", "#op-release", "input[name=id]"} {
		if b.exists(sel) {
			b.fatalf("a viewer is offered %s", sel)
		}
	}
	resp, err := chromedp.Run(b.ctx, chromedp.NavigateResponse(f.http.URL+"/entries/act?op=resolve&scope=matching&state=quarantined"))
	if err != nil || resp.Status != http.StatusForbidden {
		b.fatalf("viewer opening the action preview: %v %v, want 403", resp, err)
	}
}
