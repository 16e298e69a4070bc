package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConsoleScreenshots is `make screenshots` (it skips without
// REPLAYCTL_CONSOLE_SHOTS): it builds replayctl from this checkout, starts
// `serve` on a temporary copy of the bundled samples (no target: nothing
// is sent anywhere, nothing in the checkout is written), waits for its
// first reconcile, and captures every console page as an operator sees it
// at 1280 and 390 CSS pixels wide, full page, into the directory named
// (NAME-WIDTH.png). "Every page" is the login page, each page the
// navigation bar links to, and the first entry and the first run the
// lists link to, so a page added to the navigation is captured without an
// edit here. A page that does not answer 200 fails the run.
func TestConsoleScreenshots(t *testing.T) {
	out := os.Getenv("REPLAYCTL_CONSOLE_SHOTS")
	if out == "" {
		t.Skip("make screenshots sets REPLAYCTL_CONSOLE_SHOTS (the directory the PNGs go to)")
	}
	chromium := requireChromium(t)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "replayctl")
	if b, err := exec.Command("go", "build", "-o", bin, "../../cmd/replayctl").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	var specs []string
	for _, s := range [][2]string{{"jsonl", "entries.jsonl"}, {"cordum", "dlq.jsonl"}, {"nexora", "dead-letters.json"}} {
		data, err := os.ReadFile(filepath.Join("../../testdata", s[0], s[1]))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, s[0]+"-"+s[1])
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, s[0]+":"+p)
	}
	tokens := filepath.Join(dir, "tokens.json")
	secret, err := exec.Command(bin, "tokens", "create", "--user", "screenshots", "--role", "admin", "--tokens", tokens).Output()
	if err != nil {
		t.Fatalf("tokens create: %v", err)
	}
	addr := freeLoopback(t)
	args := []string{"serve", "--addr", addr, "--db", filepath.Join(dir, "replayctl.db"), "--tokens", tokens,
		"--rules", abs(t, "../../rules.yaml"), "--policies", abs(t, "../../policies"), "--approvers", abs(t, "../../approvers.yaml")}
	for _, s := range specs {
		args = append(args, "--source", s)
	}
	var logs bytes.Buffer
	srv := exec.Command(bin, args...)
	srv.Dir, srv.Stdout, srv.Stderr = dir, &logs, &logs
	srv.Env = cleanEnv()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = srv.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("serve's output:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	waitFirstRun(t, base, exited)

	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 5*time.Minute)}
	widths := []int64{1280, 390}
	n := 0
	capture := func(name, href string, w int64) {
		t.Helper()
		b.viewport(w, 900)
		b.navigate(href)
		png, err := os.ReadFile(b.shot(name + "-" + strconv.FormatInt(w, 10)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, name+"-"+strconv.FormatInt(w, 10)+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		n++
	}
	for _, w := range widths { // before logging in
		capture("login", base+"/login", w)
	}
	b.login(base, strings.TrimSpace(string(secret)))
	var pages [][2]string
	for _, href := range b.links("nav a[href]") {
		pages = append(pages, [2]string{pageName(href), href})
	}
	for _, list := range [][2]string{{"/entries", "entry"}, {"/runs", "run"}} {
		b.navigate(base + list[0])
		if hrefs := b.links(`a[href^="` + list[0] + `/"]`); len(hrefs) > 0 {
			pages = append(pages, [2]string{list[1], hrefs[0]})
		}
	}
	for _, w := range widths {
		for _, p := range pages {
			capture(p[0], p[1], w)
		}
	}
	t.Logf("%d screenshots of %d pages in %s", n, len(pages), out)
}

// links are the absolute URLs of the elements matching sel, in page
// order, without repeats.
func (b *browserTab) links(sel string) []string {
	b.t.Helper()
	raw := b.eval(`JSON.stringify([...new Set([...document.querySelectorAll(` + strconv.Quote(sel) + `)].map(a => a.href))])`)
	var out []string
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		b.fatalf("links %s: %v", sel, err)
	}
	return out
}

// pageName names a screenshot by its path: "/" is overview.
func pageName(href string) string {
	u, err := url.Parse(href)
	if err != nil || strings.Trim(u.Path, "/") == "" {
		return "overview"
	}
	return strings.ReplaceAll(strings.Trim(u.Path, "/"), "/", "-")
}

// waitFirstRun waits until serve's first reconcile has succeeded.
func waitFirstRun(t *testing.T, base string, exited <-chan error) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("serve exited: %v", err)
		default:
		}
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if strings.Contains(string(body), "\nreplayctl_reconcile_runs_total{result=\"succeeded\"} ") {
			return
		}
	}
	t.Fatal("serve: no successful reconcile within 2 minutes")
}

func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// cleanEnv is this process's environment without REPLAYCTL_ settings, so
// serve reads only the flags given.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REPLAYCTL_") {
			env = append(env, kv)
		}
	}
	return env
}
