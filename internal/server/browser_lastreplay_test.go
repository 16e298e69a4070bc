package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/triage"
)

// TestBrowserEntryWarnsOfLastReplay: issue #30 "one click spent an entry's
// last replay budget without a warning". A real entry (rules.yaml gives
// tool.alpha.send 2 replays) whose first replay failed at the target has
// one replay left: its page says "uses the last of 2 replays", the click
// sends nothing and asks for a confirmation that says it again, Cancel
// sends nothing, and only the confirmation's button replays.
func TestBrowserEntryWarnsOfLastReplay(t *testing.T) {
	chromium := requireChromium(t)
	// The target refuses the first delivery (a 503), then accepts.
	var mu sync.Mutex
	got := map[string]int{}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		got[r.Header.Get("Idempotency-Key")]++
		n := got[r.Header.Get("Idempotency-Key")]
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(sink.Close)
	deliveries := func() int { mu.Lock(); defer mu.Unlock(); return got["kl1"] }
	f := newBrowserFixtureWith(t, func(c *server.Config) {
		c.Router = func(rules *triage.Rules) replay.Router {
			return replay.NewRulesRouter(rules, &replay.Route{Name: "sink",
				Dispatcher: replay.NewHTTPTarget(sink.URL, "", 2*time.Second, nil)})
		}
	}, `{"id":"l1","topic":"tool.alpha.send","reason_code":"max_scheduling_retries","attempts":1,"idempotency_key":"kl1","payload":{}}`)
	f.reconcile(t, "ops-bot")
	if n := deliveries(); n != 1 {
		t.Fatalf("the reconcile delivered kl1 %d times, want 1 (refused by the target)", n)
	}
	base := f.http.URL
	op := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	op.login(base, f.tokens["ops-bot"])

	op.navigate(base + "/entries/jsonl:l1")
	if !op.exists("#act-replay") {
		op.fatalf("Replay now not offered with one replay left: %q", op.text(".actions"))
	}
	if c := op.text("#replay-cost"); c != "uses the last of 2 replays" {
		op.fatalf("cost reads %q, want %q", c, "uses the last of 2 replays")
	}
	op.shot("last-replay-offer")
	// The first click asks; nothing is sent.
	op.submit(chromedp.Click(chromedp.CSS("#act-replay")))
	if !op.exists("#confirm-last") {
		op.fatalf("no confirmation after Replay now on the last replay: %q", op.text("main"))
	}
	if c := op.text("#confirm-last"); !strings.Contains(c, "uses the last of 2 replays") || !strings.Contains(c, "kl1") {
		op.fatalf("the confirmation reads %q: it must say it uses the last of 2 replays of kl1", c)
	}
	if op.exists("#act-replay") {
		op.fatalf("the confirmation still shows the plain Replay now button")
	}
	op.shot("last-replay-confirm")
	if n := deliveries(); n != 1 {
		t.Fatalf("the first click delivered: kl1 sent %d times, want 1", n)
	}
	// Cancel goes back to the offer, sending nothing.
	op.submit(chromedp.Click(chromedp.CSS("#confirm-cancel")))
	if op.exists("#confirm-last") || !op.exists("#act-replay") {
		op.fatalf("Cancel did not return to the entry's offer")
	}
	if n := deliveries(); n != 1 {
		t.Fatalf("Cancel delivered: kl1 sent %d times, want 1", n)
	}
	// Confirmed: replayed once.
	op.submit(chromedp.Click(chromedp.CSS("#act-replay")))
	op.submit(chromedp.Click(chromedp.CSS("#confirm-replay")))
	if !op.exists("#flash.flash") || !strings.Contains(op.text("#flash"), "replay") {
		op.fatalf("no success banner after the confirmed replay: %q", op.eval(`(document.getElementById("flash")||{}).outerHTML||""`))
	}
	if n := deliveries(); n != 2 {
		t.Fatalf("kl1 sent %d times after the confirmed replay, want 2", n)
	}
}
