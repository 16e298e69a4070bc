package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// findChromium returns the path of a Chromium (or Chrome) binary, or "".
func findChromium() string {
	if fi, err := os.Stat("/usr/bin/chromium"); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// requireChromium finds the browser; without one it skips the test on a
// developer's machine and fails it in CI (CI set), where it must run.
func requireChromium(t *testing.T) string {
	t.Helper()
	p := findChromium()
	switch {
	case p != "":
		return p
	case os.Getenv("CI") != "":
		t.Fatal("CI is set but no Chromium was found (looked for /usr/bin/chromium, chromium, chromium-browser, google-chrome on PATH): " +
			"the CI script must `apt-get install -y chromium`")
	default:
		t.Skip("no Chromium found (looked for /usr/bin/chromium, chromium, chromium-browser, google-chrome on PATH); " +
			"install it with `apt-get install -y chromium` to run this browser test (in CI, with CI set, it fails instead)")
	}
	return ""
}

// browserOutput is a bytes.Buffer safe for the browser's output goroutine.
type browserOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *browserOutput) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *browserOutput) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Len is how much the browser has written so far.
func (b *browserOutput) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// Since is what the browser wrote after the first n bytes.
func (b *browserOutput) Since(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf.Bytes()[min(n, b.buf.Len()):])
}

// The package's browser tests share one headless Chromium (packageBrowser)
// and each gets a fresh browser context in it (startBrowser): a context is
// Chromium's incognito profile, with its own cookies, storage and cache, so
// what one test's logins leave is invisible to the next, as it was when
// each test started a browser of its own. Starting and stopping Chromium
// cost about 1 s of CPU each time (measured with a cgroup's cpuacct on the
// shared 2-core machine), for 29 browsers per package run.
var packageBrowser struct {
	mu     sync.Mutex
	ctx    context.Context // the browser's first tab: where contexts are made
	cancel func()
	out    *browserOutput
	home   string
}

// TestMain stops the shared browser when the package's tests end.
func TestMain(m *testing.M) {
	code := m.Run()
	stopPackageBrowser()
	os.Exit(code)
}

func stopPackageBrowser() {
	packageBrowser.mu.Lock()
	defer packageBrowser.mu.Unlock()
	if packageBrowser.cancel != nil {
		packageBrowser.cancel() // closes the browser and waits for it to exit
		packageBrowser.cancel, packageBrowser.ctx = nil, nil
	}
	if packageBrowser.home != "" {
		_ = os.RemoveAll(packageBrowser.home)
		packageBrowser.home = ""
	}
}

// sharedBrowser returns the package's browser, starting it (again, if it
// died) with a profile in a temporary directory. The flags keep the
// browser off the network (this machine's is closed): it only talks to the
// loopback test servers.
func sharedBrowser(t *testing.T, execPath string) (context.Context, *browserOutput) {
	t.Helper()
	packageBrowser.mu.Lock()
	defer packageBrowser.mu.Unlock()
	if packageBrowser.ctx != nil && packageBrowser.ctx.Err() == nil {
		return packageBrowser.ctx, packageBrowser.out
	}
	if packageBrowser.cancel != nil { // it died: say so in this test's log, start another
		t.Logf("the shared browser had ended; output:\n%s", packageBrowser.out.String())
		packageBrowser.cancel()
		_ = os.RemoveAll(packageBrowser.home)
	}
	out := &browserOutput{}
	// Everything the browser writes (profile, crash-report settings, its
	// singleton socket and shared-memory files) stays in home.
	home, err := os.MkdirTemp("", "replayctl-browser-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.Env("HOME="+home, "TMPDIR="+home,
			"XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache")),
		chromedp.ExecPath(execPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
		chromedp.UserDataDir(filepath.Join(home, "profile")),
		chromedp.WindowSize(1280, 900), // every new window's size too
		chromedp.CombinedOutput(out),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	logf := func(format string, args ...any) {
		_, _ = io.WriteString(out, "chromedp: "+strings.TrimSuffix(fmt.Sprintf(format, args...), "\n")+"\n")
	}
	ctx, cancelFirst := chromedp.NewContext(allocCtx, chromedp.WithErrorf(logf))
	cancel := func() { cancelFirst(); cancelAlloc() }
	// The first Do starts the browser, which lives as long as the context
	// it was given: ctx, not one with a deadline. A start that hangs is
	// cancelled after a minute.
	hung := time.AfterFunc(time.Minute, cancel)
	err = chromedp.Do(ctx)
	hung.Stop()
	if err != nil {
		cancel()
		_ = os.RemoveAll(home)
		t.Fatalf("start %s: %v\nbrowser output:\n%s", execPath, err, out.String())
	}
	packageBrowser.ctx, packageBrowser.cancel, packageBrowser.out, packageBrowser.home = ctx, cancel, out, home
	return ctx, out
}

// startBrowser returns a tab in a new browser context of the package's
// headless Chromium (sharedBrowser); the tab's context ends after timeout,
// and the browser context (its cookies, storage, tabs) is disposed of when
// the test ends. Screenshots, if a test takes any, belong under
// t.TempDir(), never in the repository. The browser's output while the
// test ran and chromedp's errors are logged if the test fails.
func startBrowser(t *testing.T, execPath string, timeout time.Duration) context.Context {
	t.Helper()
	browser, out := sharedBrowser(t, execPath)
	from := out.Len()
	// chromedp's errors go to out: WithErrorf is the browser's option.
	tabCtx, cancelTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	ctx, cancelTimeout := context.WithTimeout(tabCtx, timeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab() // closes the tab and disposes of its browser context
		if t.Failed() {
			t.Logf("browser output:\n%s", out.Since(from))
		}
	})
	return ctx
}

// browserFixture is a real server (bbolt store, OPA policy, jsonl source,
// HTTP sink) for the browser test.
type browserFixture struct {
	srv    *server.Server
	http   *httptest.Server
	store  *bolt.Bolt
	tokens map[string]string // user -> secret
	// tokenFile is the server's token set (addToken adds to it).
	tokenFile *server.Tokens

	mu  sync.Mutex
	got map[string]int // deliveries per Idempotency-Key

	// gate, when set (before the first replay), holds each delivery until
	// the test sends on it or closes it.
	gate chan struct{}
	held atomic.Int32 // deliveries that reached the gate
	// targetDown routes to no target (an outage): replays wait in manual review.
	targetDown atomic.Bool
}

// newBrowserFixture serves entries (JSONL lines) with the bundled rules
// and policy. Tokens: alice (approver, in platform-oncall), ops-bot
// (operator: raises the requests) and carol (viewer).
func newBrowserFixture(t *testing.T, entries ...string) *browserFixture {
	return newBrowserFixtureWith(t, nil, entries...)
}

// newBrowserFixtureWith lets a test change the server's configuration
// (its clock, say) before the server starts.
func newBrowserFixtureWith(t *testing.T, configure func(*server.Config), entries ...string) *browserFixture {
	t.Helper()
	dir := t.TempDir()
	f := &browserFixture{tokens: map[string]string{}, got: map[string]int{}}

	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if f.gate != nil { // a slow target, released by the test one request at a time
			f.held.Add(1)
			select {
			case <-f.gate:
			case <-r.Context().Done():
				return
			}
		}
		f.mu.Lock()
		f.got[r.Header.Get("Idempotency-Key")]++
		f.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(sink.Close)

	srcPath := filepath.Join(dir, "dlq.jsonl")
	if err := os.WriteFile(srcPath, []byte(strings.Join(entries, "\n")+"\n"), 0o644); err != nil {
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
	t.Cleanup(func() { st.Close() })
	f.store = st

	approversPath := filepath.Join(dir, "approvers.yaml")
	if err := os.WriteFile(approversPath, []byte("expiry: 1h\ngroups:\n  platform-oncall: [alice]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	approvers, err := approval.LoadConfig(approversPath)
	if err != nil {
		t.Fatal(err)
	}

	tokens, err := server.LoadTokens(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct{ user, role string }{
		{"alice", server.RoleApprover}, {"ops-bot", server.RoleOperator}, {"carol", server.RoleViewer},
	} {
		secret, err := tokens.Create(u.user, u.role, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		f.tokens[u.user] = secret
	}

	f.tokenFile = tokens
	cfg := server.Config{
		Store:     st,
		Tokens:    tokens,
		Sources:   []source.Source{src},
		Approvers: approvers,
		Engine: func(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
			return policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 0)
		},
		Router: func(rules *triage.Rules) replay.Router {
			if f.targetDown.Load() {
				return replay.NewRulesRouter(rules, nil)
			}
			timeout := 2 * time.Second
			if f.gate != nil { // a held delivery must outlast the test's pace
				timeout = time.Minute
			}
			return replay.NewRulesRouter(rules, &replay.Route{Name: "sink",
				Dispatcher: replay.NewHTTPTarget(sink.URL, "", timeout, nil)})
		},
	}
	if configure != nil {
		configure(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	f.http = httptest.NewServer(srv)
	t.Cleanup(f.http.Close)
	t.Cleanup(srv.Wait) // runs first: no reconcile outlives the store
	return f
}

// api calls the JSON API with a user's bearer token.
func (f *browserFixture) api(t *testing.T, method, path, who string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.http.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.tokens[who])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// reconcile starts a reconcile through the API as who and waits for it.
func (f *browserFixture) reconcile(t *testing.T, who string) server.Run {
	t.Helper()
	code, body := f.api(t, http.MethodPost, "/api/reconcile", who)
	if code != http.StatusAccepted {
		t.Fatalf("POST /api/reconcile as %s: %d %s", who, code, body)
	}
	var run server.Run
	if err := json.Unmarshal(body, &run); err != nil || run.ID == "" {
		t.Fatalf("POST /api/reconcile: no run id in %s (%v)", body, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		code, body := f.api(t, http.MethodGet, "/api/runs/"+run.ID, who)
		if code != http.StatusOK {
			t.Fatalf("GET /api/runs/%s: %d %s", run.ID, code, body)
		}
		run = server.Run{}
		if err := json.Unmarshal(body, &run); err != nil {
			t.Fatalf("GET /api/runs: %v in %s", err, body)
		}
		if run.State != "running" {
			if run.State != "succeeded" {
				t.Fatalf("reconcile %s ended %s: %s", run.ID, run.State, run.Error)
			}
			return run
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("reconcile %s did not finish in 30s", run.ID)
	return server.Run{}
}

// approvalRecord reads an approval request straight from the store.
func (f *browserFixture) approvalRecord(t *testing.T, id string) *store.Approval {
	t.Helper()
	var a *store.Approval
	if err := f.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		a, err = tx.Approval(id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if a == nil {
		t.Fatalf("approval %s is not in the store", id)
	}
	return a
}

func (f *browserFixture) deliveries(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got[key]
}
