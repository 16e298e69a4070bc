package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/runs"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/triage"
)

// TestBrowserCanaryAborts: issue 31. After an outage the operator replays
// the waiting entries from the bulk page behind a canary of 2; the target
// still refuses (422), so the run ends aborted_by_canary: only the slice
// was sent, the runs page says so, and the rest is untouched.
func TestBrowserCanaryAborts(t *testing.T) {
	chromium := requireChromium(t)
	var mu sync.Mutex
	got := map[string]int{}
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		got[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		w.WriteHeader(http.StatusUnprocessableEntity) // the fix is not deployed
	}))
	t.Cleanup(refusing.Close)
	var up atomic.Bool
	var entries []string
	for _, id := range []string{"c1", "c2", "c3", "c4", "c5", "c6"} {
		entries = append(entries, `{"id":"`+id+`","topic":"tool.email.send","reason_code":"timeout","idempotency_key":"k`+id+`","payload":{}}`)
	}
	f := newBrowserFixtureWith(t, func(cfg *server.Config) {
		cfg.Router = func(rules *triage.Rules) replay.Router {
			if !up.Load() {
				return replay.NewRulesRouter(rules, nil) // the outage: nowhere to send
			}
			return replay.NewRulesRouter(rules, &replay.Route{Name: "refusing", Dispatcher: replay.NewHTTPTarget(refusing.URL, "", 2*time.Second, nil)})
		}
	}, entries...)
	f.reconcile(t, "ops-bot")
	up.Store(true)
	base := f.http.URL

	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	b.login(base, f.tokens["ops-bot"])
	b.navigate(base + "/bulk?class=transient")
	if m, w := b.text("#matched"), b.text("#would"); m != "6" || w != "6" {
		b.fatalf("preview: %s match, %s would replay", m, w)
	}
	if v := b.value("#canary"); v != "" {
		b.fatalf("6 entries (under the offer threshold) came with a canary of %q", v)
	}
	b.do(chromedp.SendKeys(chromedp.CSS("#canary"), "2"))
	b.do(chromedp.SetValue(chromedp.CSS("#canary-watch"), "0s"))
	b.submit(chromedp.Click(chromedp.CSS("button#execute")))
	if flash := b.text("p#flash"); !strings.Contains(flash, "bulk replay started") {
		b.fatalf("after confirm: %q", flash)
	}
	f.srv.Wait()
	mu.Lock()
	sent := len(got)
	mu.Unlock()
	if sent != 2 {
		b.fatalf("%d keys sent, want only the canary's 2", sent)
	}
	b.navigate(base + "/runs")
	b.shot("runs-aborted-by-canary")
	if txt := b.text("#runs"); !strings.Contains(txt, runs.AbortedByCanary) {
		b.fatalf("runs page: %q", txt)
	}
	code, body := f.api(t, http.MethodGet, "/api/runs", "ops-bot")
	var list struct {
		Items []server.Run `json:"items"`
	}
	if err := json.Unmarshal(body, &list); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/runs: %d %v", code, err)
	}
	var bulk *server.Run
	for i := range list.Items {
		if list.Items[i].Op == "bulk-replay" {
			_, one := f.api(t, http.MethodGet, "/api/runs/"+list.Items[i].ID, "ops-bot")
			bulk = &server.Run{}
			if err := json.Unmarshal(one, bulk); err != nil {
				t.Fatal(err)
			}
		}
	}
	if bulk == nil || bulk.State != runs.AbortedByCanary || bulk.Bulk == nil || bulk.Bulk.Canary == nil ||
		len(bulk.Bulk.Canary.Failures) != 2 || bulk.Bulk.Canary.Untouched != 4 {
		t.Fatalf("the bulk run: %+v", bulk)
	}
}
