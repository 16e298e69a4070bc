package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// fixedClock is a replay.Clock stopped at one instant (a plan asked in
// the past).
type fixedClock struct{ at time.Time }

func (c fixedClock) Now() time.Time                                   { return c.at }
func (c fixedClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// requestPlan keeps a plan for the transient entries as ops-bot would
// with dlq replay --request-approval, under the rules and policy of
// rulesPath, at clock's time.
func (f *browserFixture) requestPlan(t *testing.T, rulesPath string, clock replay.Clock, ttl time.Duration) *replay.Plan {
	t.Helper()
	ctx := context.Background()
	eng, _, err := policy.LoadEngine(ctx, rulesPath, "../../policies", 0)
	if err != nil {
		t.Fatal(err)
	}
	// The route only has to exist for the preview: nothing is sent.
	router := replay.NewRulesRouter(eng.Rules, &replay.Route{Name: "sink", Dispatcher: replay.NewHTTPTarget("http://127.0.0.1:9/", "", time.Second, nil)})
	b := &replay.Bulk{Reconciler: &replay.Reconciler{Engine: eng, Store: f.store, Router: router, Actor: "ops-bot", Clock: clock}, Inventory: f.store}
	p, err := b.RequestPlan(ctx, replay.BulkFilter{Classes: []string{"transient"}}, replay.PlanRequest{Reason: "replay after INC-7", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBrowserPlanPageStartsTheApprovedPlan: issue 31 point 4 in the
// console. The approved plan's page offers Start only when the plan would
// start; a start the server refuses (here the rules changed between the
// page and the click) comes back as an error and sends nothing; the same
// click once the rules are the plan's again starts exactly the plan. An
// expired plan and one asked under other rules show why instead of a
// button.
func TestBrowserPlanPageStartsTheApprovedPlan(t *testing.T) {
	chromium := requireChromium(t)
	line := func(id string) string {
		return `{"id":"` + id + `","topic":"tool.email.send","reason_code":"timeout","idempotency_key":"k` + id + `","payload":{}}` + "\n"
	}
	// The server's source is a file the test appends to: p4 fails after
	// the plan was approved.
	dlq := filepath.Join(t.TempDir(), "dlq.jsonl")
	if err := os.WriteFile(dlq, []byte(line("p1")+line("p2")+line("p3")), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.Parse("jsonl:" + dlq)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "rules.yaml")
	rules, err := os.ReadFile("../../rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, append(rules, []byte("\n# edited after the plan\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	var edited atomic.Bool // the server's rules file, edited after the page loaded
	f := newBrowserFixtureWith(t, func(cfg *server.Config) {
		cfg.Engine = func(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
			if edited.Load() {
				return policy.LoadEngine(ctx, other, "../../policies", 0)
			}
			return policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 0)
		}
		cfg.Sources = []source.Source{src}
	})
	f.targetDown.Store(true) // the outage: the entries wait
	f.reconcile(t, "ops-bot")
	f.targetDown.Store(false)

	plan := f.requestPlan(t, "../../rules.yaml", replay.SystemClock{}, time.Hour)
	lapsed := f.requestPlan(t, "../../rules.yaml", fixedClock{time.Now().Add(-3 * time.Hour)}, time.Hour)
	stale := f.requestPlan(t, other, replay.SystemClock{}, time.Hour)
	for _, id := range []string{plan.ID, stale.ID} {
		req, _ := http.NewRequest(http.MethodPost, f.http.URL+"/api/approvals/"+id+"/approve", strings.NewReader(`{"reason":"INC-7 reviewed"}`))
		req.Header.Set("Authorization", "Bearer "+f.tokens["alice"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("approve %s: %d", id, resp.StatusCode)
		}
	}
	// p4 arrives after the approval and waits: it matches the plan's
	// filter but is not in the approved set.
	f.targetDown.Store(true)
	fh, err := os.OpenFile(dlq, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString(line("p4")); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	f.reconcile(t, "ops-bot")
	f.targetDown.Store(false)
	// alice approved the lapsed one in time; its expiry passed since.
	if err := f.store.Update(context.Background(), func(tx store.Tx) error {
		a, err := tx.Approval(lapsed.ID)
		if err != nil {
			return err
		}
		a.State, a.DecidedBy, a.DecidedAt = store.ApprovalApproved, "alice", time.Now().Add(-150*time.Minute)
		return tx.PutApproval(a)
	}); err != nil {
		t.Fatal(err)
	}

	base := f.http.URL
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 90*time.Second)}
	b.login(base, f.tokens["ops-bot"])
	// The approvals page links the plan to its page.
	b.navigate(base + "/approvals?state=approved&mine=all")
	b.submit(chromedp.Click(chromedp.CSS(`a[href="/plans/` + plan.ID + `"]`)))
	if st := b.text("#plan-state"); st != "approved" {
		b.fatalf("plan state %q", st)
	}
	if got := b.text("#plan-entries"); !strings.HasPrefix(got, "3 to replay") {
		b.fatalf("entries: %q", got)
	}
	if b.exists("#plan-refusal") || !b.exists("button#start") {
		b.fatalf("an approved, current plan shows no start button")
	}
	b.shot("plan-approved")

	// The rules change before the click: the server refuses, the page
	// says why as an error, nothing is sent.
	edited.Store(true)
	b.submit(chromedp.Click(chromedp.CSS("button#start")))
	if role, msg := b.eval(`document.querySelector("#flash").getAttribute("role")`), b.text("#flash"); role != "alert" ||
		!strings.Contains(msg, "not started: plan no longer holds: the rules and policy changed since the plan") {
		b.fatalf("refused start: %s %q", role, msg)
	}
	if b.exists("button#start") || !strings.Contains(b.text("#plan-refusal"), "plan no longer holds") {
		b.fatalf("after the rules changed the page still offers start")
	}
	b.shot("plan-refused")
	for _, id := range []string{"p1", "p2", "p3"} {
		if n := f.deliveries("k" + id); n != 0 {
			b.fatalf("a refused start sent %s %d times", id, n)
		}
	}

	// The rules are the plan's again: start runs exactly the plan.
	edited.Store(false)
	b.navigate(base + "/plans/" + plan.ID)
	b.submit(chromedp.Click(chromedp.CSS("button#start")))
	if flash := b.text("p#flash"); !strings.Contains(flash, "plan "+plan.ID+" started as ") || !strings.Contains(b.location(), "/runs/") {
		b.fatalf("after start: %q on %s", flash, b.location())
	}
	f.srv.Wait()
	for _, id := range []string{"p1", "p2", "p3"} {
		if n := f.deliveries("k" + id); n != 1 {
			b.fatalf("%s delivered %d times, want once", id, n)
		}
	}
	if n := f.deliveries("kp4"); n != 0 {
		b.fatalf("p4, not in the plan, was delivered %d times", n)
	}
	b.navigate(b.location())
	if ex := b.text("#run-excluded"); !strings.Contains(ex, "Excluded, arrived after the plan (1): jsonl:p4") {
		b.fatalf("the run page does not list the later arrival: %q", ex)
	}
	b.shot("plan-run")
	b.navigate(base + "/plans/" + plan.ID)
	if st, why := b.text("#plan-state"), b.text("#plan-refusal"); st != "executed" || !strings.Contains(why, "was already executed") || b.exists("button#start") {
		b.fatalf("an executed plan: %q %q", st, why)
	}

	// Expired, and asked under other rules: the reason, no button.
	b.navigate(base + "/plans/" + lapsed.ID)
	if why := b.text("#plan-refusal"); !strings.Contains(why, "plan expired: "+lapsed.ID+" expired at") || b.exists("button#start") {
		b.fatalf("expired plan: %q", why)
	}
	b.navigate(base + "/plans/" + stale.ID)
	if why := b.text("#plan-refusal"); !strings.Contains(why, "the rules and policy changed since the plan") || !b.exists("#current-snapshot") || b.exists("button#start") {
		b.fatalf("plan under other rules: %q", why)
	}
	b.shot("plan-other-rules")
	// On a phone: nothing past the viewport, every control named.
	b.viewport(390, 844)
	b.navigate(base + "/plans/" + plan.ID)
	if over, un := b.overflowing(), b.unnamed(); len(over)+len(un) > 0 {
		b.fatalf("plan page at 390 px: past the viewport %v, unnamed %v", over, un)
	}

	// The API says the same.
	code, body := f.api(t, http.MethodGet, "/api/plans/"+stale.ID, "carol")
	var v server.PlanView
	if err := json.Unmarshal(body, &v); code != http.StatusOK || err != nil || v.Startable || v.State != store.ApprovalApproved ||
		!strings.Contains(v.Refusal, "plan no longer holds") {
		t.Fatalf("GET /api/plans/%s: %d %s", stale.ID, code, body)
	}
	if code, body := f.api(t, http.MethodPost, "/api/plans/"+stale.ID+"/start", "ops-bot"); code != http.StatusConflict || !strings.Contains(string(body), `"plan_refused"`) {
		t.Fatalf("POST start of a stale plan: %d %s", code, body)
	}
	if code, _ := f.api(t, http.MethodPost, "/api/plans/"+stale.ID+"/start", "carol"); code != http.StatusForbidden {
		t.Fatalf("a viewer started a plan: %d", code)
	}
	if code, _ := f.api(t, http.MethodGet, "/api/plans/plan_0000000000000000", "carol"); code != http.StatusNotFound {
		t.Fatalf("unknown plan: %d", code)
	}
}
