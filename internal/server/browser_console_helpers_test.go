package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Helpers for the console's browser tests (issue #18).

// login signs the tab in with a token through the login form.
func (b *browserTab) login(base, secret string) {
	b.t.Helper()
	b.navigate(base + "/login")
	b.do(chromedp.SendKeys(chromedp.CSS("input#token"), secret))
	b.submit(chromedp.Click(chromedp.CSS("button#login")))
}

// viewport sets the tab's layout viewport (CSS pixels).
func (b *browserTab) viewport(w, h int64) {
	b.t.Helper()
	b.do(chromedp.EmulateViewport(w, h))
}

// shot saves a full-page screenshot under the test's temp dir; with
// REPLAYCTL_SCREENSHOTS set (make screenshots) it is copied there too.
func (b *browserTab) shot(name string) string {
	b.t.Helper()
	// A page that has just loaded (or refreshed itself) can report no
	// layout yet: try again briefly.
	var png []byte
	var err error
	for try := 0; try < 20; try++ {
		if png, err = chromedp.Run(b.ctx, chromedp.FullScreenshot(100)); err == nil { // 100: PNG (below it is JPEG)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		b.fatalf("screenshot %s: %v", name, err)
	}
	file := b.t.Name() + "-" + name + ".png"
	file = strings.NewReplacer("/", "_", " ", "_").Replace(file)
	p := filepath.Join(b.t.TempDir(), file)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	if dir := os.Getenv("REPLAYCTL_SCREENSHOTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	return p
}

// overflowJS lists the elements that reach past the viewport's right (or
// left) edge. Elements inside a scrolling or clipping box are that box's
// business (the box itself is checked), and a visually hidden skip link
// parked off-screen is not content.
const overflowJS = `(() => {
  const W = document.documentElement.clientWidth, out = [];
  if (document.documentElement.scrollWidth > W) out.push("document is " + document.documentElement.scrollWidth + "px wide, viewport " + W);
  const clipped = el => { for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
    const cs = getComputedStyle(p); if (cs.overflowX !== "visible") return true; } return false; };
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right <= 0 && getComputedStyle(el).position === "absolute") continue;
    if (clipped(el)) continue;
    if (r.right > W + 0.5 || r.left < -0.5)
      out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + " " + Math.round(r.left) + ".." + Math.round(r.right) + ": " + el.outerHTML.slice(0, 80));
  }
  return JSON.stringify(out.slice(0, 15));
})()`

// overflowing returns the elements wider than the viewport.
func (b *browserTab) overflowing() []string {
	b.t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(b.eval(overflowJS)), &out); err != nil {
		b.fatalf("overflow check: %v", err)
	}
	return out
}

// unnamedJS lists the controls a screen reader could not name: no
// aria-label, no label, no text, no title.
const unnamedJS = `(() => {
  const out = [];
  for (const el of document.querySelectorAll("a[href], button, input:not([type=hidden]), select, textarea, summary, progress")) {
    let name = (el.getAttribute("aria-label") || "").trim();
    if (!name && el.labels && el.labels.length) name = Array.from(el.labels).map(l => l.textContent).join(" ").trim();
    if (!name && !["INPUT", "SELECT", "TEXTAREA", "PROGRESS"].includes(el.tagName)) name = el.textContent.trim();
    if (!name) name = (el.getAttribute("title") || "").trim();
    if (!name) out.push(el.outerHTML.slice(0, 120));
  }
  return JSON.stringify(out);
})()`

func (b *browserTab) unnamed() []string {
	b.t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(b.eval(unnamedJS)), &out); err != nil {
		b.fatalf("accessible-name check: %v", err)
	}
	return out
}

// tabTo presses Tab until the element with id has the focus (at most
// max presses), as a keyboard user moves through the page.
func (b *browserTab) tabTo(id string, max int) int {
	b.t.Helper()
	for i := 1; i <= max; i++ {
		b.do(chromedp.KeyEvent("\t"))
		if b.eval(`document.activeElement ? document.activeElement.id : ""`) == id {
			return i
		}
	}
	b.fatalf("#%s never got the focus in %d Tab presses", id, max)
	return 0
}

// waitFor polls a JavaScript condition (the page's own refresh or a run
// in the server), up to d.
func (b *browserTab) waitFor(js string, d time.Duration) bool {
	b.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// addToken creates one more token in the fixture's token file (the
// server reads the same *Tokens, so it takes effect at once).
func (f *browserFixture) addToken(t *testing.T, user, role string) (string, error) {
	t.Helper()
	secret, err := f.tokenFile.Create(user, role, time.Now())
	if err == nil {
		f.tokens[user] = secret
	}
	return secret, err
}
