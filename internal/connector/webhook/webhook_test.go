package webhook

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/connectortest"
	"github.com/replayctl/replayctl/internal/entry"
)

// httpTarget is the HTTP target with a rules.yaml header carrying the secret.
func httpTarget(t testing.TB, base, secret string) connector.Dispatcher {
	return NewHTTPTarget(base+"/hook", base+"/probe", 5*time.Second, map[string]string{"Authorization": "Bearer " + secret})
}

func TestHTTPTargetConformance(t *testing.T) {
	t.Run("redirect", func(t *testing.T) { connectortest.RedirectNeverCommits(t, httpTarget) })
	t.Run("dropped", func(t *testing.T) { connectortest.DroppedConnectionNeverResent(t, httpTarget) })
	t.Run("control", func(t *testing.T) {
		got := connectortest.ControlCharacterIDsSent(t, httpTarget)
		if i := got.Header.Get("X-Replay-Entry-Id"); i != "job%1B[31m%00%FF%25" {
			t.Errorf("X-Replay-Entry-Id %q", i)
		}
		if got.Header.Get("X-Replay-Encoding") != "percent" {
			t.Errorf("encoding header %q", got.Header.Get("X-Replay-Encoding"))
		}
	})
}

// TestHTTPTargetProbeDoesNotFollowRedirects: a probe answered 302 is
// inconclusive, and the key never goes to the other host.
func TestHTTPTargetProbeDoesNotFollowRedirects(t *testing.T) {
	other := connectortest.NewElsewhere(t)
	target := connectortest.Redirector(t, http.StatusFound, other.URL)
	h := NewHTTPTarget(target.URL, target.URL+"/probe", 5*time.Second, map[string]string{"X-Secret": "probe-secret-55"})
	pr, detail := h.Probe(context.Background(), "k-1")
	if pr != connector.ProbeInconclusive {
		t.Errorf("probe %v (%s), want inconclusive", pr, detail)
	}
	if n := other.Hits(); n != 0 {
		t.Errorf("the redirect's host got %d probe requests", n)
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
	e := &entry.Entry{ID: id, Source: "jsonl", Payload: []byte(`{}`)}
	res := NewHTTPTarget(srv.URL, "", 5*time.Second, nil).Dispatch(context.Background(), connector.Request{Entry: e, Key: "key\x1b", Attempt: 1})
	if res.Outcome != connector.Succeeded {
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
	if res := x.Dispatch(context.Background(), connector.Request{Entry: e, Key: "key\x1b", Attempt: 1}); res.Outcome != connector.Succeeded {
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
		want         connector.Outcome
	}{
		{"hangs", `sleep 600 & echo $! > "$PIDFILE"; sleep 600`, connector.Unknown},
		{"exits", `sleep 600 & echo $! > "$PIDFILE"; echo done; exit 0`, connector.Succeeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "pid")
			t.Setenv("REPLAY_PIDFILE", pidfile)
			x := &ExecTarget{Command: []string{"/bin/sh", "-c", `PIDFILE="$REPLAY_PIDFILE"; ` + tc.script}, Timeout: time.Second}
			done := make(chan connector.Result, 1)
			go func() {
				done <- x.Dispatch(context.Background(), connector.Request{Entry: &entry.Entry{ID: "e"}, Key: "k", Attempt: 1})
			}()
			var res connector.Result
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
	res := x.Dispatch(context.Background(), connector.Request{Entry: &entry.Entry{ID: "e"}, Key: "k", Attempt: 1})
	if res.Outcome != connector.Succeeded {
		t.Fatalf("outcome %s", res.Outcome)
	}
	if len(res.Detail) > 3<<10 || !strings.HasPrefix(res.Detail, "START") || !strings.HasSuffix(res.Detail, "END") || !strings.Contains(res.Detail, "bytes left out") {
		t.Errorf("detail: %d bytes, %q...%q", len(res.Detail), res.Detail[:min(40, len(res.Detail))], res.Detail[max(0, len(res.Detail)-40):])
	}
	if strings.Contains(res.Detail, "exec-secret-31") || !strings.Contains(res.Detail, "REPLAY_IDEMPOTENCY_KEY=k") {
		t.Errorf("environment: %s", res.Detail[max(0, len(res.Detail)-1024):])
	}
}

// TestHeaderThatCannotBeSentFails: a rules.yaml header value with a
// control character is refused by net/http before sending, on every run;
// it was not_sent each time, spending no budget, pending for ever. It is
// a failure a person looks at, and the value stays out of the detail.
func TestHeaderThatCannotBeSentFails(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	h := NewHTTPTarget(srv.URL, "", 5*time.Second, map[string]string{"X-Token": "tok-secret\r\nX-Evil: 1"})
	res := h.Dispatch(context.Background(), connector.Request{Entry: &entry.Entry{ID: "e"}, Key: "k", Attempt: 1})
	if res.Outcome != connector.Failed || hits != 0 {
		t.Errorf("outcome %s (%s), %d requests; want failed, none", res.Outcome, res.Detail, hits)
	}
	if strings.Contains(res.Detail, "tok-secret") {
		t.Errorf("detail carries the header value: %s", res.Detail)
	}
}
