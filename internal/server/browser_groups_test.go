package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayctl/replayctl/internal/store"
)

// TestBrowserGroups: issue 31. After an outage the overview's main table
// shows the two causes behind five entries, largest first, each with its
// actions. The operator holds the payments cause from the overview (the
// overview then says a group is held), then replays the email cause from
// the Groups page through the bulk preview: exactly its three entries go
// out, the held ones never. A viewer sees the groups without actions.
func TestBrowserGroups(t *testing.T) {
	chromium := requireChromium(t)
	f := newBrowserFixture(t,
		`{"id":"m1","topic":"tool.email.send","reason_code":"timeout","message":"upstream timed out after 30012ms","idempotency_key":"km1","payload":{}}`,
		`{"id":"m2","topic":"tool.email.send","reason_code":"timeout","message":"upstream timed out after 29870ms","idempotency_key":"km2","payload":{}}`,
		`{"id":"m3","topic":"tool.email.send","reason_code":"timeout","message":"upstream timed out after 31000ms","idempotency_key":"km3","payload":{}}`,
		`{"id":"p1","topic":"tool.pay.charge","reason_code":"dependency_unavailable","message":"charge 'ord-1': payments-api 503","idempotency_key":"kp1","payload":{}}`,
		`{"id":"p2","topic":"tool.pay.charge","reason_code":"dependency_unavailable","message":"charge 'ord-2': payments-api 503","idempotency_key":"kp2","payload":{}}`)
	f.targetDown.Store(true) // the outage: everything waits
	f.reconcile(t, "ops-bot")
	f.targetDown.Store(false)
	base := f.http.URL

	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 90*time.Second)}
	b.login(base, f.tokens["ops-bot"])
	b.navigate(base + "/")
	b.shot("overview-groups")
	rows := b.eval(`Array.from(document.querySelectorAll("#groups tbody tr")).map(r => r.dataset.group + " " + r.dataset.state + " " + r.querySelector(".open").textContent).join("\n")`)
	lines := strings.Split(rows, "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], " open 3") || !strings.HasSuffix(lines[1], " open 2") {
		b.fatalf("overview groups, largest open first:\n%s", rows)
	}
	email, pay := strings.Fields(lines[0])[0], strings.Fields(lines[1])[0]
	if txt := b.text("#group-" + pay); !strings.Contains(txt, "dependency_unavailable: charge '?': payments-api #") {
		b.fatalf("payments row: %q", txt)
	}

	// Hold the payments cause from the overview.
	b.do(chromedp.SendKeys(chromedp.CSS(`#group-`+pay+` input[name="reason"]`), "until the payments fix is deployed"),
		chromedp.SendKeys(chromedp.CSS(`#group-`+pay+` input[name="until"]`), "4h"))
	b.submit(chromedp.Click(chromedp.CSS("#hold-" + pay)))
	if loc := b.location(); !strings.HasPrefix(loc, base+"/?flash=") {
		b.fatalf("after hold on %s, want the overview", loc)
	}
	if flash := b.text("p#flash"); !strings.Contains(flash, "group "+pay+" held by ops-bot") {
		b.fatalf("flash %q", flash)
	}
	if held := b.text("#held-groups"); !strings.HasPrefix(held, "1 group(s) held") {
		b.fatalf("held groups notice %q", held)
	}
	if st := b.eval(`document.querySelector("#group-` + pay + `").dataset.state`); st != store.GroupHeld {
		b.fatalf("payments group state %q after the hold", st)
	}
	if !b.exists("#release-" + pay) {
		b.fatalf("a held group offers no release")
	}

	// Replay the email cause from the Groups page, through the preview.
	b.navigate(base + "/groups")
	b.submit(chromedp.Click(chromedp.CSS("#replay-" + email)))
	if m, w := b.text("#matched"), b.text("#would"); m != "3" || w != "3" {
		b.fatalf("group preview: %s match, %s would replay; want 3 and 3", m, w)
	}
	b.submit(chromedp.Click(chromedp.CSS("button#execute")))
	f.srv.Wait()
	for _, k := range []string{"km1", "km2", "km3"} {
		if n := f.deliveries(k); n != 1 {
			b.fatalf("%s delivered %d times, want once", k, n)
		}
	}
	for _, k := range []string{"kp1", "kp2"} {
		if n := f.deliveries(k); n != 0 {
			b.fatalf("held %s delivered %d times", k, n)
		}
	}
	// The held group's preview says why nothing would go.
	b.navigate(base + "/bulk?group=" + pay)
	if w, why := b.text("#would"), b.text("table#why"); w != "0" || !strings.Contains(why, "group held") {
		b.fatalf("held group's preview: would %s, why %q", w, why)
	}

	// A viewer sees the groups, not the actions.
	v := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	v.login(base, f.tokens["carol"])
	v.navigate(base + "/groups")
	if n := v.eval(`String(document.querySelectorAll("#groups tbody tr").length)`); n != "2" {
		v.fatalf("viewer sees %s groups", n)
	}
	if v.exists(".group-actions") {
		v.fatalf("a viewer is offered group actions")
	}
}
