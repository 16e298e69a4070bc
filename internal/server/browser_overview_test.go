package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserOverview: issue #18 overview: server-rendered SVG charts of
// inflow vs drained and of outcomes, depth by class/source/topic, oldest
// open age, approvals waiting, last run; every count is a link to the
// filtered list, which shows that many entries.
func TestBrowserOverview(t *testing.T) {
	chromium := requireChromium(t)
	// 4 quarantined (poison), 2 awaiting approval, 2 transient the sink takes.
	f := newBrowserFixture(t, append(consoleEntries()[:4], highRisk("h1"), highRisk("h2"),
		`{"id":"t1","topic":"tool.email.send","reason_code":"timeout","attempts":1,"idempotency_key":"kt1","payload":{}}`,
		`{"id":"t2","topic":"tool.email.send","reason_code":"timeout","attempts":1,"idempotency_key":"kt2","payload":{}}`)...)
	f.reconcile(t, "ops-bot")
	base := f.http.URL
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	b.login(base, f.tokens["carol"])
	b.navigate(base + "/")
	b.shot("overview-1280")
	if n := b.text("#open-count"); n != "6" {
		b.fatalf("open count %s, want 6 (4 quarantined + 2 awaiting approval)", n)
	}
	if b.text("#oldest") == "none" {
		b.fatalf("no oldest open age")
	}
	// Charts: two server-rendered SVGs whose summaries carry the numbers.
	labels := b.eval(`Array.from(document.querySelectorAll("svg.chart")).map(s => s.getAttribute("aria-label")).join("\n")`)
	// Inflow comes from the store's hourly series by class: 4 poison + 4
	// transient; the transient ones the sink took are drained, and each
	// class has its own inflow vs drained chart.
	for _, want := range []string{"poison 4", "transient 4", "drained (replayed or resolved) 2", "succeeded 2",
		"transient: new entries vs drained per hour, last 24 h: transient new 4, transient drained 2",
		"poison: new entries vs drained per hour, last 24 h: poison new 4, poison drained 0"} {
		if !strings.Contains(labels, want) {
			b.fatalf("chart summaries lack %q:\n%s", want, labels)
		}
	}
	if n := b.eval(`String(document.querySelectorAll("svg.chart rect").length)`); n == "0" {
		b.fatalf("charts have no bars")
	}
	if n := b.eval(`String(document.querySelectorAll("#flow-by-class svg.chart").length)`); n != "2" {
		b.fatalf("%s per-class flow charts, want 2 (poison, transient)", n)
	}
	b.eval(`document.querySelector("#flow-by-class").scrollIntoView(), ""`)
	b.shot("overview-flow-by-class")
	if w := b.text("#approvals-waiting"); !strings.Contains(w, "platform-oncall: 2") {
		b.fatalf("approvals waiting reads %q", w)
	}
	// Every count links to the filtered list with that many entries.
	for _, c := range []struct{ sel, want string }{
		{"#by-class a", "4"}, // poison first (largest)
		{"#by-source a", "6"},
		{"#by-topic a", "4"},
	} {
		b.navigate(base + "/")
		text := b.text(c.sel)
		b.submit(chromedp.Click(chromedp.CSS(c.sel)))
		if n := b.text("#total-n"); n != c.want || !strings.HasSuffix(text, ": "+c.want) {
			b.fatalf("%s (%q) leads to %s (%s entries), want %s", c.sel, text, b.location(), n, c.want)
		}
	}
	b.navigate(base + "/")
	b.submit(chromedp.Click(chromedp.CSS("#approvals-waiting a")))
	if n := b.eval(`String(document.querySelectorAll("#approvals article").length)`); n != "2" {
		b.fatalf("approvals-waiting link leads to %s requests, want 2", n)
	}
}
