package replay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
)

// elsewhere is the host a redirect points at: it counts what reaches it
// and keeps the headers it saw.
type elsewhere struct {
	*httptest.Server
	hits    atomic.Int32
	mu      sync.Mutex
	headers []http.Header
}

func newElsewhere(t *testing.T) *elsewhere {
	e := &elsewhere{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		e.mu.Lock()
		e.headers = append(e.headers, r.Header.Clone())
		e.mu.Unlock()
		w.WriteHeader(http.StatusOK) // a 200 that must not count as a delivery
	}))
	t.Cleanup(e.Close)
	return e
}

// redirector answers every request with status and Location to.
func redirector(t *testing.T, status int, to string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, to+r.URL.Path, status)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestHTTPTargetRedirectIsNotADelivery: a target answering 301, 302, 303,
// 307 or 308 has not got the payload; net/http used to follow it to the
// other host (as a GET without the body for 301-303), carrying the
// Idempotency-Key and the rules.yaml secret header, and record its 200
// as succeeded.
func TestHTTPTargetRedirectIsNotADelivery(t *testing.T) {
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			other := newElsewhere(t)
			target := redirector(t, status, other.URL)
			h := NewHTTPTarget(target.URL+"/hook", "", 5*time.Second, map[string]string{"Authorization": "Bearer hook-secret-91"})
			e := &entry.Entry{ID: "j1", Source: entry.KindJSONL, Payload: []byte(`{"a":1}`)}
			res := h.Dispatch(context.Background(), Request{Entry: e, Key: "k-1", Attempt: 1})
			if res.Outcome == Succeeded || res.Outcome.Retryable() {
				t.Errorf("outcome %s (%s), want failed: the payload went nowhere", res.Outcome, res.Detail)
			}
			if res.Status != status || !strings.Contains(res.Detail, "not followed") {
				t.Errorf("status %d detail %q", res.Status, res.Detail)
			}
			if n := other.hits.Load(); n != 0 {
				t.Errorf("the redirect's host got %d requests (headers %v)", n, other.headers)
			}
		})
	}
}

// TestHTTPTargetProbeDoesNotFollowRedirects: a probe answered 302 is
// inconclusive, and the key never goes to the other host.
func TestHTTPTargetProbeDoesNotFollowRedirects(t *testing.T) {
	other := newElsewhere(t)
	target := redirector(t, http.StatusFound, other.URL)
	h := NewHTTPTarget(target.URL, target.URL+"/probe", 5*time.Second, map[string]string{"X-Secret": "probe-secret-55"})
	pr, detail := h.Probe(context.Background(), "k-1")
	if pr != ProbeInconclusive {
		t.Errorf("probe %v (%s), want inconclusive", pr, detail)
	}
	if n := other.hits.Load(); n != 0 {
		t.Errorf("the redirect's host got %d probe requests", n)
	}
}

// TestCordumRedirectCarriesNoKey: a gateway that redirects the retry POST
// (307) keeps CORDUM_API_KEY from the other host and the retry is not
// recorded replayed on the other host's 200.
func TestCordumRedirectCarriesNoKey(t *testing.T) {
	other := newElsewhere(t)
	gw := redirector(t, http.StatusTemporaryRedirect, other.URL)
	ct, err := NewCordumTarget(gw.URL, 5*time.Second, Credentials{CordumAPIKey: testCordumKey, CordumTenantID: "default"})
	if err != nil {
		t.Fatal(err)
	}
	e := &entry.Entry{ID: "job-1", Source: entry.KindCordum}
	res := ct.Dispatch(context.Background(), Request{Entry: e, Key: "k-1", Attempt: 1})
	if res.Outcome == Succeeded || res.Outcome == HandledElsewhere || res.SourceUpdated {
		t.Errorf("outcome %s (%s)", res.Outcome, res.Detail)
	}
	if pr, d := ct.ProbeEntry(context.Background(), e); pr != ProbeInconclusive {
		t.Errorf("probe through a redirect: %v (%s)", pr, d)
	}
	if n := other.hits.Load(); n != 0 {
		t.Errorf("the other host got %d requests, headers %v", n, other.headers)
	}
	if strings.Contains(res.Detail, testCordumKey) {
		t.Errorf("detail carries the key: %s", res.Detail)
	}
}

// droppingGateway is a raw HTTP/1.1 server: it answers the first request
// on a connection 200 and keeps it alive, and on the second request it
// reads it whole and closes the connection without an answer, the way a
// gateway that crashed (or an idle timeout racing the request) does.
// Requests to later connections are answered 200 {"job_id":"NEW"}.
type droppingGateway struct {
	ln    net.Listener
	URL   string
	mu    sync.Mutex
	paths []string // every request line read, in order
}

func newDroppingGateway(t *testing.T) *droppingGateway {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &droppingGateway{ln: ln, URL: "http://" + ln.Addr().String()}
	t.Cleanup(func() { ln.Close() })
	go func() {
		first := true
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.serve(c, first)
			first = false
		}
	}()
	return g
}

func (g *droppingGateway) serve(c net.Conn, drop bool) {
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 0; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		g.mu.Lock()
		g.paths = append(g.paths, req.Method+" "+req.URL.Path)
		g.mu.Unlock()
		if drop && n == 1 {
			return // read in full, never answered
		}
		body := `{"job_id":"NEW"}`
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
}

func (g *droppingGateway) requests(path string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, p := range g.paths {
		if strings.HasSuffix(p, path) {
			n++
		}
	}
	return n
}

// TestDroppedConnectionIsNotResent: a replay POST read by the gateway on
// a kept-alive connection that then breaks reaches the gateway exactly
// once and is outcome_unknown. The POSTs have no body and carry an
// Idempotency-Key, which net/http took as leave to resend them on a new
// connection by itself: two Cordum jobs, recorded succeeded.
func TestDroppedConnectionIsNotResent(t *testing.T) {
	for _, kind := range []string{"cordum", "nexora", "http"} {
		t.Run(kind, func(t *testing.T) {
			g := newDroppingGateway(t)
			var d Dispatcher
			var path string
			switch kind {
			case "cordum":
				ct, err := NewCordumTarget(g.URL, 5*time.Second, Credentials{CordumAPIKey: testCordumKey, CordumTenantID: "default"})
				if err != nil {
					t.Fatal(err)
				}
				d, path = ct, "/job-2/retry"
			case "nexora":
				nt, err := NewNexoraTarget(g.URL, 5*time.Second, Credentials{NexoraToken: testNexoraTok})
				if err != nil {
					t.Fatal(err)
				}
				d, path = nt, "/job-2/replay"
			default:
				d, path = NewHTTPTarget(g.URL+"/hook", "", 5*time.Second, nil), "/hook"
			}
			// The first replay leaves a kept-alive connection behind.
			first := d.Dispatch(context.Background(), Request{Entry: &entry.Entry{ID: "job-1"}, Key: "k-1", Attempt: 1})
			if first.Outcome != Succeeded {
				t.Fatalf("first replay: %s (%s)", first.Outcome, first.Detail)
			}
			before := g.requests(path)
			res := d.Dispatch(context.Background(), Request{Entry: &entry.Entry{ID: "job-2"}, Key: "k-2", Attempt: 1})
			if n := g.requests(path) - before; n != 1 {
				t.Errorf("the gateway got the replay %d times, want once", n)
			}
			if res.Outcome != Unknown {
				t.Errorf("outcome %s (%s), want outcome_unknown", res.Outcome, res.Detail)
			}
		})
	}
}

// TestControlCharacterIDIsSent: an id and key with ESC (and a NUL, and
// invalid UTF-8) are sent percent-encoded, saying so, rather than refused
// by net/http on every run and left pending forever.
func TestControlCharacterIDIsSent(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	id := "job\x1b[31m\x00\xff%"
	e := &entry.Entry{ID: id, Source: entry.KindJSONL, Payload: []byte(`{}`)}
	res := NewHTTPTarget(srv.URL, "", 5*time.Second, nil).Dispatch(context.Background(), Request{Entry: e, Key: "key\x1b", Attempt: 1})
	if res.Outcome != Succeeded {
		t.Fatalf("outcome %s (%s)", res.Outcome, res.Detail)
	}
	if k, i := got.Get("Idempotency-Key"), got.Get("X-Replay-Entry-Id"); k != "key%1B" || i != "job%1B[31m%00%FF%25" {
		t.Errorf("key %q id %q", k, i)
	}
	if got.Get("X-Replay-Encoding") != "percent" {
		t.Errorf("encoding header %q", got.Get("X-Replay-Encoding"))
	}
	// An exec target gets the same in its environment (NUL is refused by exec).
	dir := t.TempDir()
	out := filepath.Join(dir, "env")
	x := &ExecTarget{Command: []string{"/bin/sh", "-c", `printf '%s|%s|%s' "$REPLAY_ENTRY_ID" "$REPLAY_IDEMPOTENCY_KEY" "$REPLAY_ENCODING" > ` + out}, Timeout: 10 * time.Second}
	if res := x.Dispatch(context.Background(), Request{Entry: e, Key: "key\x1b", Attempt: 1}); res.Outcome != Succeeded {
		t.Fatalf("exec outcome %s (%s)", res.Outcome, res.Detail)
	}
	b, err := os.ReadFile(out)
	if err != nil || string(b) != "job%1B[31m%00%FF%25|key%1B|percent" {
		t.Errorf("exec env %q %v", b, err)
	}
}

// TestExecTimeoutKillsBackgroundChild: a command that leaves a child in
// the background holding its output used to hold the dispatch until the
// child ended (the timeout killed only the command itself).
func TestExecTimeoutKillsBackgroundChild(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         Outcome
	}{
		{"hangs", `sleep 600 & echo $! > "$PIDFILE"; sleep 600`, Unknown},
		{"exits", `sleep 600 & echo $! > "$PIDFILE"; echo done; exit 0`, Succeeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "pid")
			t.Setenv("REPLAY_PIDFILE", pidfile)
			x := &ExecTarget{Command: []string{"/bin/sh", "-c", `PIDFILE="$REPLAY_PIDFILE"; ` + tc.script}, Timeout: time.Second}
			done := make(chan Result, 1)
			go func() {
				done <- x.Dispatch(context.Background(), Request{Entry: &entry.Entry{ID: "e"}, Key: "k", Attempt: 1})
			}()
			var res Result
			select {
			case res = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("dispatch still held by the background child after 60s (timeout 1s)")
			}
			if res.Outcome != tc.want {
				t.Errorf("outcome %s (%s), want %s", res.Outcome, res.Detail, tc.want)
			}
			b, err := os.ReadFile(pidfile)
			if err != nil {
				t.Fatal(err)
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			// The child is killed; it may linger as a zombie of init for a moment.
			for range 100 {
				if syscall.Kill(pid, 0) != nil || zombie(pid) {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Errorf("background child %d still running", pid)
		})
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] == "Z"
}

// TestExecOutputCappedAndEnvSanitised: 8 MiB of output keeps its first and
// last KiB; replayctl's own environment (CORDUM_API_KEY) is not passed on.
func TestExecOutputCappedAndEnvSanitised(t *testing.T) {
	t.Setenv("CORDUM_API_KEY", "exec-secret-31")
	x := &ExecTarget{Command: []string{"/bin/sh", "-c", `echo START; head -c 8388608 /dev/zero | tr '\0' x; echo; env; echo END`}, Timeout: 30 * time.Second}
	res := x.Dispatch(context.Background(), Request{Entry: &entry.Entry{ID: "e"}, Key: "k", Attempt: 1})
	if res.Outcome != Succeeded {
		t.Fatalf("outcome %s", res.Outcome)
	}
	if len(res.Detail) > 3<<10 || !strings.HasPrefix(res.Detail, "START") || !strings.HasSuffix(res.Detail, "END") || !strings.Contains(res.Detail, "bytes left out") {
		t.Errorf("detail: %d bytes, %q...%q", len(res.Detail), res.Detail[:min(40, len(res.Detail))], res.Detail[max(0, len(res.Detail)-40):])
	}
	if strings.Contains(res.Detail, "exec-secret-31") || !strings.Contains(res.Detail, "REPLAY_IDEMPOTENCY_KEY=k") {
		t.Errorf("environment: %s", res.Detail[max(0, len(res.Detail)-1024):])
	}
}
