package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserEntriesSortGlobsAge: the entries list sorted by last failure,
// filtered by several topic globs and by age, from the store's indexes
// (issue #18: no scan left for the console's filters): the form's sort
// orders the rows, two globs list both topics' entries and an age keeps
// only the entries that failed long enough ago.
func TestBrowserEntriesSortGlobsAge(t *testing.T) {
	chromium := requireChromium(t)
	now := time.Now().UTC()
	var lines []string
	for i := range 12 {
		// Quarantined (schema_invalid), failed i days ago (c00 most recently).
		topic := []string{"orders.created", "orders.paid.eu", "billing.invoice"}[i%3]
		lines = append(lines, fmt.Sprintf(`{"id":"c%02d","topic":%q,"reason_code":"schema_invalid","message":"bad field","attempts":1,"idempotency_key":"kc-%02d","last_failure":%q,"payload":{}}`,
			i, topic, i, now.Add(-time.Duration(i)*24*time.Hour-time.Hour).Format(time.RFC3339)))
	}
	f := newBrowserFixture(t, lines...)
	f.reconcile(t, "ops-bot")
	base := f.http.URL
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	b.login(base, f.tokens["carol"])
	rows := func() string {
		return b.eval(`Array.from(document.querySelectorAll("#entries tbody tr a[href^='/entries/']")).map(a => a.textContent.trim()).join(",")`)
	}

	b.navigate(base + "/entries?state=open")
	b.do(chromedp.SetValue(chromedp.CSS("#f-sort"), "oldest"))
	b.submit(chromedp.Submit(chromedp.CSS("#f-sort")))
	if got := rows(); !strings.HasPrefix(got, "jsonl:c11,jsonl:c10,jsonl:c09") {
		b.fatalf("sorted oldest failure first: %s", got)
	}
	b.navigate(base + "/entries?state=open&sort=newest&size=3")
	if got := rows(); got != "jsonl:c00,jsonl:c01,jsonl:c02" {
		b.fatalf("newest first, page 1 of 3: %s", got)
	}
	// Two globs: orders.** (created and paid.eu) and billing.*: all 12;
	// orders.paid.* and billing.*: 8.
	b.navigate(base + "/entries?topic=orders.paid.*,billing.*&sort=oldest")
	if n := b.text("#total-n"); n != "8" {
		b.fatalf("two topic globs: %s entries, want 8", n)
	}
	if got := rows(); strings.Contains(got, "jsonl:c00") || strings.Contains(got, "jsonl:c03") || !strings.HasPrefix(got, "jsonl:c11,jsonl:c10,jsonl:c08") {
		b.fatalf("two topic globs list %s", got)
	}
	b.shot("entries-globs-sorted")
	// Older than 5 days: c05 (5 days and an hour ago) to c11.
	b.navigate(base + "/entries?age=120h&sort=newest")
	if n := b.text("#total-n"); n != "7" {
		b.fatalf("older than 120h: %s entries, want 7", n)
	}
	if got := rows(); !strings.HasPrefix(got, "jsonl:c05,jsonl:c06") {
		b.fatalf("older than 120h, newest first: %s", got)
	}
	b.shot("entries-age")
}
