package server_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserAuditPage: issue #18 audit: paging and filters (actor, kind,
// entry), the verified head shown, and a reload verifies only the records
// added since (the chain is not walked again per load).
func TestBrowserAuditPage(t *testing.T) {
	chromium := requireChromium(t)
	f := newBrowserFixture(t, consoleEntries()...)
	f.reconcile(t, "ops-bot") // 25 decisions
	base := f.http.URL
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	b.login(base, f.tokens["carol"])

	b.navigate(base + "/audit")
	verify := b.text("#verify")
	m := regexp.MustCompile(`chain verified: (\d+) records.*; (\d+) new record\(s\) verified on this load`).FindStringSubmatch(verify)
	if m == nil || m[1] != m[2] || !b.exists("#head") {
		b.fatalf("first load: %q, want every record verified and the head shown", verify)
	}
	first, _ := strconv.Atoi(m[1])
	b.navigate(base + "/audit")
	if v := b.text("#verify"); !strings.Contains(v, fmt.Sprintf("chain verified: %d records", first)) || !strings.Contains(v, "; 0 new record(s)") {
		b.fatalf("second load: %q, want nothing re-verified", v)
	}
	// One more record (a release by ops-bot through the API) is the only one verified next.
	if code, body := f.api(t, "POST", "/api/dead-letters/jsonl:a03/release", "ops-bot"); code != 200 {
		t.Fatalf("release: %d %s", code, body)
	}
	b.navigate(base + "/audit")
	if v := b.text("#verify"); !strings.Contains(v, fmt.Sprintf("chain verified: %d records", first+1)) || !strings.Contains(v, "; 1 new record(s)") {
		b.fatalf("after one more record: %q", v)
	}

	// Filters: kind, actor, entry.
	b.do(chromedp.SetValue(chromedp.CSS("#au-kind"), "decision"))
	b.submit(chromedp.Click(chromedp.CSS("#au-apply")))
	if n := b.text("#audit-n"); n != "25" {
		b.fatalf("kind decision: %s records, want 25", n)
	}
	b.navigate(base + "/audit?entry=jsonl:a03")
	rows := b.eval(`Array.from(document.querySelectorAll("#records tbody tr td:nth-child(5)")).map(td => td.textContent).join(",")`)
	if rows == "" || strings.Trim(strings.ReplaceAll(rows, "jsonl:a03", ""), ",") != "" {
		b.fatalf("entry jsonl:a03: rows for %q", rows)
	}
	b.navigate(base + "/audit?kind=release&actor=ops-bot")
	if n := b.text("#audit-n"); n != "1" {
		b.fatalf("releases by ops-bot: %s, want 1", n)
	}

	// Paging, ten a page, newest first, pages continuing.
	b.navigate(base + "/audit?size=10")
	seqs := func() []int {
		var out []int
		for _, s := range strings.Split(b.eval(`Array.from(document.querySelectorAll("#records tbody tr td:first-child")).map(td => td.textContent).join(",")`), ",") {
			n, _ := strconv.Atoi(s)
			out = append(out, n)
		}
		return out
	}
	p1 := seqs()
	if len(p1) != 10 || p1[0] != first+1 || p1[9] != first-8 {
		b.fatalf("page 1: %v, want %d down to %d", p1, first+1, first-8)
	}
	b.submit(chromedp.Click(chromedp.CSS("#au-next")))
	if p2 := seqs(); len(p2) != 10 || p2[0] != first-9 {
		b.fatalf("page 2: %v, want from %d", p2, first-9)
	}
	b.shot("audit-page2")
}
