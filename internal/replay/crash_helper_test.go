package replay_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/replay"
)

// The crash child's environment: set only by TestCrashReconcileSurvivesSIGKILL
// when it re-executes the test binary.
const (
	crashChildEnv  = "REPLAYCTL_CRASH_CHILD"
	crashDBEnv     = "REPLAYCTL_CRASH_DB"
	crashSourceEnv = "REPLAYCTL_CRASH_SOURCE"
	crashTargetEnv = "REPLAYCTL_CRASH_TARGET"
	// crashModeEnv: "" runs reconcile; "single" replays each entry with
	// Reconciler.One (dlq replay ID, the API's replay), 4 at a time;
	// "bulk" runs one bulk replay over every stored entry.
	crashModeEnv = "REPLAYCTL_CRASH_MODE"
)

// Lines the child prints so that the parent can time its kills from the
// moments that matter rather than from process start (which is mostly
// the policy compiling).
const (
	markReady    = "crash-child: ready"    // store open, Run about to start
	markDispatch = "crash-child: dispatch" // first dispatch of this process
)

// crashEntry is one generated DLQ entry and what the rules make of it.
type crashEntry struct {
	ID, Key    string
	Quarantine bool   // schema_invalid: quarantined, never replayed
	line       string // the entry in replayctl's jsonl format
}

// makeCrashEntries builds n entries: every quarantineEvery-th is
// schema_invalid (the bundled rules quarantine it), the others are
// timeouts on a topic the bundled rules replay automatically (not
// payments, no risk label), each with its own idempotency key.
func makeCrashEntries(n, quarantineEvery int) []crashEntry {
	entries := make([]crashEntry, 0, n)
	for i := range n {
		ce := crashEntry{ID: fmt.Sprintf("crash-%04d", i), Key: fmt.Sprintf("email-send-%04d", i), Quarantine: i%quarantineEvery == 0}
		reason, msg := "timeout", "smtp relay timed out after 30s"
		if ce.Quarantine {
			reason, msg = "schema_invalid", "payload does not match tool.email.send v2"
		}
		ce.line = fmt.Sprintf(`{"id":%q,"topic":"tool.email.send","reason_code":%q,"message":%q,"attempts":%d,`+
			`"idempotency_key":%q,"labels":{"team":"growth"},"payload":{"n":%d,"to":"user%d@example.com"}}`,
			ce.ID, reason, msg, 1+i%3, ce.Key, i, i)
		entries = append(entries, ce)
	}
	return entries
}

// writeCrashSource writes the entries to path in an order drawn from rng.
// The same entries in a new order each run: otherwise every run would
// first re-decide the growing prefix of finished entries, and after a
// few runs no kill would land while anything is being dispatched.
func writeCrashSource(t *testing.T, path string, entries []crashEntry, rng *rand.Rand) {
	t.Helper()
	var sb strings.Builder
	for _, i := range rng.Perm(len(entries)) {
		sb.WriteString(entries[i].line)
		sb.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// crashSink is a slow HTTP target that counts deliveries per
// Idempotency-Key, so kills land while requests are in flight.
type crashSink struct {
	srv *httptest.Server

	mu        sync.Mutex
	rng       *rand.Rand
	delivered map[string]int
	total     int
}

func newCrashSink(t *testing.T, rng *rand.Rand) *crashSink {
	t.Helper()
	s := &crashSink{rng: rng, delivered: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.delivered[r.Header.Get("Idempotency-Key")]++
		s.total++
		d := time.Duration(1+s.rng.IntN(15)) * time.Millisecond
		s.mu.Unlock()
		time.Sleep(d) // the sink's own latency, not a wait in the test
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// deliveries is how many requests the sink has taken so far.
func (s *crashSink) deliveries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// stop waits for every request in flight and returns the counts.
func (s *crashSink) stop() map[string]int {
	s.srv.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered
}

// childOutput collects a child's output and signals its markers.
type childOutput struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	ready    chan struct{}
	dispatch chan struct{}
}

func newChildOutput() *childOutput {
	return &childOutput{ready: make(chan struct{}), dispatch: make(chan struct{})}
}

func (o *childOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	signal := func(mark string, ch chan struct{}) {
		select {
		case <-ch:
		default:
			if bytes.Contains(o.buf.Bytes(), []byte(mark+"\n")) {
				close(ch)
			}
		}
	}
	signal(markReady, o.ready)
	signal(markDispatch, o.dispatch)
	return len(p), nil
}

func (o *childOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// crashChild is one reconcile process.
type crashChild struct {
	cmd  *exec.Cmd
	out  *childOutput
	done chan error
}

// startCrashChild re-executes the test binary as a reconcile process.
func startCrashChild(t *testing.T, db, src, target string) *crashChild {
	t.Helper()
	return startCrashChildMode(t, "", db, src, target)
}

// startCrashChildMode starts a child making single ("single") or bulk
// ("bulk") replays instead of a reconcile run.
func startCrashChildMode(t *testing.T, mode, db, src, target string) *crashChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", crashDBEnv+"="+db, crashSourceEnv+"="+src, crashTargetEnv+"="+target,
		crashModeEnv+"="+mode)
	c := &crashChild{cmd: cmd, out: newChildOutput(), done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start reconcile child: %v", err)
	}
	go func() { c.done <- cmd.Wait() }()
	return c
}

// announcingDispatcher prints markDispatch before the first dispatch of
// the process, then sends every request through the real target.
type announcingDispatcher struct {
	next replay.Dispatcher
	once sync.Once
}

func (a *announcingDispatcher) Dispatch(ctx context.Context, r replay.Request) replay.Result {
	a.once.Do(func() { fmt.Println(markDispatch) })
	return a.next.Dispatch(ctx, r)
}

// crashPaths are the files one crash test works on.
type crashPaths struct{ db, source string }

func newCrashPaths(t *testing.T) crashPaths {
	dir := t.TempDir()
	return crashPaths{db: filepath.Join(dir, "replayctl.db"), source: filepath.Join(dir, "dlq.jsonl")}
}

// killedBySIGKILL reports whether a child's Wait error is the kill.
func killedBySIGKILL(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// happened reports whether a marker channel was closed.
func happened(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// droppingTarget is an HTTP/1.1 target on a raw listener that takes the
// first request it gets on a kept-alive connection (the second or later
// on that connection) and then drops the connection without answering:
// a target that crashed after receiving the replay. Every other request
// is answered 200 with keep-alive.
type droppingTarget struct {
	ln net.Listener

	mu      sync.Mutex
	conns   map[net.Conn]bool
	seen    map[string]int
	dropped string // key of the request taken and never answered
}

func newDroppingTarget(t *testing.T) *droppingTarget {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &droppingTarget{ln: ln, conns: map[net.Conn]bool{}, seen: map[string]int{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		d.mu.Lock()
		for c := range d.conns {
			c.Close() // the client's idle keep-alive connections
		}
		d.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d.mu.Lock()
			d.conns[c] = true
			d.mu.Unlock()
			wg.Go(func() { d.serve(c) })
		}
	})
	return d
}

func (d *droppingTarget) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 0; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		key := req.Header.Get("Idempotency-Key")
		d.mu.Lock()
		d.seen[key]++
		drop := n > 0 && d.dropped == ""
		if drop {
			d.dropped = key
		}
		d.mu.Unlock()
		if drop {
			return // received in full, never answered
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"); err != nil {
			return
		}
	}
}

func (d *droppingTarget) droppedKey() (key string, seen int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped, d.seen[d.dropped]
}
