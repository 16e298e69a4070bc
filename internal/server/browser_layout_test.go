package server_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestBrowserLayout390: issue #18 "at 390 px no element overflows the
// viewport horizontally", and every control has an accessible name, on
// every page of the console, as an admin sees it (every button shown).
// Screenshots of each page are saved for review (make screenshots).
func TestBrowserLayout390(t *testing.T) {
	chromium := requireChromium(t)
	long := strings.Repeat("x", 300) // an unbroken token must wrap, not widen the page
	entries := append(consoleEntries()[:4],
		`{"id":"h1","topic":"tool.email.send","reason_code":"timeout","attempts":3,"idempotency_key":"key-h1","labels":{"risk":"high"},"payload":{"to":"h1@example.com"}}`,
		fmt.Sprintf(`{"id":"long-%s","topic":"tool.alpha.send","reason_code":"schema_invalid","message":"%s","attempts":1,"idempotency_key":"k-%s","payload":{"blob":"%s"}}`, long[:60], long, long, long))
	f := newBrowserFixture(t, entries...)
	run := f.reconcile(t, "ops-bot")
	admin, err := f.addToken(t, "root", "admin")
	if err != nil {
		t.Fatal(err)
	}
	base := f.http.URL
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 120*time.Second)}
	b.viewport(390, 844)
	b.login(base, admin)
	pages := []struct{ name, path string }{
		{"overview", "/"},
		{"entries", "/entries"},
		{"entry", "/entries/" + url.PathEscape("jsonl:long-"+long[:60])},
		{"entry-h1", "/entries/jsonl:h1"},
		{"approvals", "/approvals"},
		{"runs", "/runs"},
		{"run", "/runs/" + run.ID},
		{"audit", "/audit"},
		{"bulk", "/bulk?class=poison"},
		{"act", "/entries/act?op=resolve&scope=matching&topic=tool.alpha.*"},
		{"backtest", "/backtest"},
	}
	for _, p := range pages {
		b.navigate(base + p.path)
		if over := b.overflowing(); len(over) > 0 {
			b.shot(p.name + "-390-overflow")
			b.fatalf("%s at 390 px: elements past the viewport:\n%s", p.path, strings.Join(over, "\n"))
		}
		if un := b.unnamed(); len(un) > 0 {
			b.fatalf("%s: controls without an accessible name:\n%s", p.path, strings.Join(un, "\n"))
		}
		if b.eval(`document.querySelector('meta[name=viewport]') ? "y" : ""`) != "y" {
			b.fatalf("%s has no viewport meta", p.path)
		}
		b.shot(p.name + "-390")
	}
	// The skip link is the first stop for a keyboard user and leads to
	// the content.
	b.navigate(base + "/entries")
	b.tabTo("skip", 1)
}
