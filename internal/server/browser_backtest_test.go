package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayctl/replayctl/internal/server"
)

// TestBrowserBacktestPage: issue 32 point 1 in the console. A viewer
// backtests a looser policy the server is configured with: one recorded
// decision would change, the high-risk entry that waited for a person
// would now be replayed automatically, and the page highlights it, in the
// changes by rule and failure group and in its own list. Pasted candidate
// text that does not load is an error on the page. Nothing is written or
// sent: the audit chain's head is the same before and after.
func TestBrowserBacktestPage(t *testing.T) {
	chromium := requireChromium(t)
	dir := t.TempDir()
	loose := "package replayctl\ndecision := {\"action\": input.proposed_action, \"reasons\": [\"keep the proposal\"]}\n"
	if err := os.WriteFile(filepath.Join(dir, "loose.rego"), []byte(loose), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newBrowserFixtureWith(t, func(cfg *server.Config) {
		cfg.BacktestCandidates = []server.BacktestCandidate{{Name: "loose", Rules: "../../rules.yaml", Policies: dir}}
	},
		`{"id":"e1","topic":"tool.email.send","reason_code":"timeout","idempotency_key":"k-e1","payload":{}}`,
		`{"id":"h1","topic":"tool.email.send","reason_code":"timeout","idempotency_key":"k-h1","payload":{},"labels":{"risk":"high"}}`,
		`{"id":"g1","topic":"tool.email.send","reason_code":"policy_denied","idempotency_key":"k-g1","payload":{}}`)
	f.reconcile(t, "ops-bot")
	sent := f.deliveries("k-e1") + f.deliveries("k-h1") + f.deliveries("k-g1")
	_, before := f.api(t, http.MethodGet, "/api/audit/verify", "carol")

	base := f.http.URL
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	b.login(base, f.tokens["carol"])
	b.navigate(base + "/backtest")
	if v := b.value("#bt-candidate"); v != "loose" {
		b.fatalf("the configured candidate is not offered first: %q", v)
	}
	b.submit(chromedp.Click(chromedp.CSS("button#bt-run")))
	if d, c, a := b.text("#bt-decisions"), b.text("#bt-changed"), b.text("#bt-now-auto"); d != "3" || c != "1" || a != "1" {
		b.fatalf("summary: %s decisions, %s changed, %s now automatic", d, c, a)
	}
	if auto := b.text("#bt-auto"); !strings.Contains(auto, "jsonl:h1") || strings.Contains(auto, "jsonl:e1") {
		b.fatalf("would now auto-replay: %q", auto)
	}
	row := b.eval(`(document.querySelector("#bt-groups tr.highlight") || {innerText: ""}).innerText`)
	if !strings.Contains(row, "auto_replay") || !strings.Contains(row, "jsonl:h1") {
		b.fatalf("the change to auto_replay is not highlighted in the groups: %q", row)
	}
	if !b.exists(`#bt-groups a.auto[href="/entries/jsonl:h1"]`) {
		b.fatalf("the sample that would now auto-replay is not marked")
	}
	b.shot("backtest-loose")

	// What the source holds now, against today's rules.
	b.do(chromedp.SetValue(chromedp.CSS("#bt-source"), "*"))
	b.submit(chromedp.Click(chromedp.CSS("button#bt-run")))
	if s := b.text("#bt-summary"); !strings.Contains(s, "entries read from the sources") || b.text("#bt-now-auto") != "1" {
		b.fatalf("from the sources: %q", s)
	}

	// Pasted text that does not load: the problems, as an error.
	b.do(chromedp.SetValue(chromedp.CSS("#bt-candidate"), ""), chromedp.SetValue(chromedp.CSS("#bt-source"), ""),
		chromedp.SendKeys(chromedp.CSS("#bt-rules"), "version: v2\n"))
	resp, err := chromedp.RunResponse(b.ctx, chromedp.Click(chromedp.CSS("button#bt-run")))
	if err != nil || resp.Status != http.StatusUnprocessableEntity {
		b.fatalf("a broken candidate: %v %v", resp, err)
	}
	if msg := b.text("#error"); !strings.Contains(msg, "version") || b.exists("#bt-summary") {
		b.fatalf("broken candidate: %q", msg)
	}
	if got := b.value("#bt-rules"); !strings.Contains(got, "version: v2") {
		b.fatalf("the form lost the pasted text: %q", got)
	}

	if _, after := f.api(t, http.MethodGet, "/api/audit/verify", "carol"); string(after) != string(before) {
		t.Fatalf("the backtest wrote to the chain:\n%s\n%s", before, after)
	}
	if now := f.deliveries("k-e1") + f.deliveries("k-h1") + f.deliveries("k-g1"); now != sent {
		t.Fatalf("the backtest sent %d replays", now-sent)
	}
}
