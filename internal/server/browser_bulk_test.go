package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// TestBrowserBulkPreviewAndConfirm: after an outage an operator filters
// the waiting entries on the bulk page, reads the preview's counts, and
// confirms; the replays go out once each.
func TestBrowserBulkPreviewAndConfirm(t *testing.T) {
	chromium := requireChromium(t)
	dir := t.TempDir()
	var mu sync.Mutex
	got := map[string]int{}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		got[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
	}))
	defer sink.Close()
	lines := []string{
		`{"id":"t1","topic":"tool.email.send","reason_code":"timeout","attempts":3,"idempotency_key":"k1","payload":{"n":1}}`,
		`{"id":"t2","topic":"tool.email.send","reason_code":"timeout","attempts":3,"idempotency_key":"k2","payload":{"n":2}}`,
		`{"id":"t3","topic":"tool.email.send","reason_code":"timeout","attempts":3,"idempotency_key":"k3","payload":{"n":3}}`,
		`{"id":"h1","topic":"tool.email.send","reason_code":"timeout","attempts":3,"idempotency_key":"k4","labels":{"risk":"high"},"payload":{"n":4}}`,
	}
	srcPath := filepath.Join(dir, "dlq.jsonl")
	if err := os.WriteFile(srcPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.Parse("jsonl:" + srcPath)
	if err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(dir, "replayctl.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tokens, err := server.LoadTokens(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := tokens.Create("olga", server.RoleOperator, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var targetUp atomic.Bool // the outage: no target until it is fixed
	srv, err := server.New(server.Config{Store: st, Tokens: tokens, Sources: []source.Source{src},
		Approvers: &approval.Config{Expiry: time.Hour},
		Engine: func(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
			return policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 0)
		},
		Router: func(rules *triage.Rules) replay.Router {
			if !targetUp.Load() {
				return replay.NewRulesRouter(rules, nil)
			}
			return replay.NewRulesRouter(rules, &replay.Route{Name: "sink", Dispatcher: replay.NewHTTPTarget(sink.URL, "", 5*time.Second, nil)})
		}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/api/reconcile", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("start reconcile: %v %v", resp, err)
	}
	resp.Body.Close()
	srv.Wait()
	targetUp.Store(true)

	ctx := startBrowser(t, chromium, 60*time.Second)
	b := &browserTab{t: t, ctx: ctx}
	b.navigate(hs.URL + "/bulk")
	b.do(chromedp.SendKeys(chromedp.CSS("input#token"), secret))
	b.submit(chromedp.Click(chromedp.CSS("button#login")))
	if loc := b.location(); loc != hs.URL+"/bulk" {
		b.fatalf("after login on %s, want /bulk", loc)
	}
	b.do(chromedp.SendKeys(chromedp.CSS(`input[name="class"]`), "transient"))
	b.submit(chromedp.Click(chromedp.CSS("button#preview")))
	if m, w := b.text("#matched"), b.text("#would"); m != "4" || w != "3" {
		b.fatalf("preview: %s match, %s would replay; want 4 and 3", m, w)
	}
	if why := b.text("table#why"); !strings.Contains(why, "awaits approval") {
		b.fatalf("preview's reasons: %q", why)
	}
	mu.Lock()
	before := len(got)
	mu.Unlock()
	if before != 0 {
		b.fatalf("the preview dispatched %d replays", before)
	}
	b.submit(chromedp.Click(chromedp.CSS("button#execute")))
	if flash := b.text("p#flash"); !strings.Contains(flash, "bulk replay started") || !strings.Contains(flash, "by olga") {
		b.fatalf("after confirm: %q", flash)
	}
	srv.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got["k1"] != 1 || got["k2"] != 1 || got["k3"] != 1 || got["k4"] != 0 {
		t.Fatalf("deliveries %v: want k1-k3 once each, k4 (awaiting approval) never", got)
	}
}
