// Package webhook holds the generic targets: an HTTP endpoint that takes
// a POST of the payload (with its idempotency key in headers, and an
// optional compensating GET), and a command that takes it on stdin.
// They are connectors without a source: they only dispatch and probe.
//
// They must never follow a redirect, resend on their own, let a
// configured header leave for another host, or let a command outlive its
// timeout or print without bound.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/httpout"
	"github.com/replayctl/replayctl/internal/entry"
)

// HTTPTarget posts payloads to a URL.
type HTTPTarget struct {
	URL      string
	ProbeURL string
	Headers  map[string]string
	Client   *httpout.Client
}

// NewHTTPTarget returns a target with its own keep-alive client that
// never follows a redirect, never resends by itself and keeps the
// configured header values out of every detail.
func NewHTTPTarget(u, probe string, timeout time.Duration, headers map[string]string) *HTTPTarget {
	c := httpout.New(timeout)
	for _, v := range headers {
		c.AddSecret(v)
	}
	return &HTTPTarget{URL: u, ProbeURL: probe, Headers: headers, Client: c}
}

// Dispatch POSTs the payload with the idempotency headers.
func (t *HTTPTarget) Dispatch(ctx context.Context, r connector.Request) connector.Result {
	body := []byte(r.Entry.Payload)
	if len(body) == 0 {
		body = []byte("null")
	}
	// Made for this request and handed to it (SendOwned): one map and
	// one array of values, no copy.
	h := newHeader(idHeaders + 1 + len(t.Headers))
	h.set("Content-Type", "application/json")
	for k, v := range t.Headers {
		h.set(http.CanonicalHeaderKey(k), v)
	}
	setIDHeaders(&h, r)
	a, res := t.Client.SendOwned(ctx, http.MethodPost, t.URL, h.Header, body, 0)
	if res != nil {
		return *res
	}
	out := connector.Result{Status: a.Status, Detail: t.Client.Redact(a.Excerpt()), TargetDown: httpout.TargetDownStatus(a.Status)}
	switch {
	case a.Status >= 200 && a.Status < 300, a.Status == http.StatusConflict:
		out.Outcome = connector.Succeeded
	case a.Status >= 500:
		out.Outcome = connector.Retry
	case a.Status == http.StatusTooManyRequests || a.Status == http.StatusRequestTimeout:
		out.Outcome = connector.Retry // the target says it did not take it, try later
	default:
		out.Outcome = connector.Failed // a 3xx included: the payload went nowhere
	}
	return out
}

// Probe GETs the probe URL with the key (query parameter and header).
func (t *HTTPTarget) Probe(ctx context.Context, key string) (connector.ProbeResult, string) {
	u, err := url.Parse(t.ProbeURL)
	if err != nil {
		return connector.ProbeInconclusive, "bad probe URL: " + t.Client.Redact(err.Error())
	}
	q := u.Query()
	q.Set("key", key)
	u.RawQuery = q.Encode()
	h := http.Header{}
	h.Set("Idempotency-Key", connector.HeaderValue(key))
	a, err := t.Client.Get(ctx, u.String(), h, 1<<20)
	if err != nil {
		return connector.ProbeInconclusive, "probe failed: " + err.Error()
	}
	switch a.Status {
	case http.StatusOK:
		return connector.ProbeCommitted, "probe HTTP 200: committed"
	case http.StatusNotFound:
		return connector.ProbeNotCommitted, "probe HTTP 404: not committed"
	}
	return connector.ProbeInconclusive, "probe " + a.Excerpt() + ": inconclusive"
}

// setIDHeaders sets the key, the entry id, the attempt and the lineage
// stamp, encoded (connector.Encode) when one cannot travel as it is, and
// says so in X-Replay-Encoding. The lineage stamp (entry.LineageLabel,
// issue 27): a message that fails again and comes back carrying it is
// linked to this entry (entry.LineageOf), so max_replays counts across
// the chain; entry.ReplayCountLabel carries the replay's number.
func setIDHeaders(h *header, r connector.Request) {
	key, k := connector.Encode(r.Key)
	id, i := connector.Encode(r.Entry.ID)
	lineage, l := connector.Encode(r.Entry.LineageStamp())
	attempt := strconv.Itoa(r.Attempt)
	h.set("Idempotency-Key", key)
	h.set("X-Replay-Entry-Id", id)
	h.set("X-Replay-Attempt", attempt)
	h.set(lineageHeader, lineage)
	h.set(replayCountHeader, attempt)
	if k || i || l {
		h.set(connector.EncodingHeader, connector.PercentEncoding)
	}
}

// idHeaders is the most headers setIDHeaders sets.
const idHeaders = 6

// The lineage headers' names in canonical form (what http.Header.Set
// would make of them).
var (
	lineageHeader     = http.CanonicalHeaderKey(entry.LineageLabel)
	replayCountHeader = http.CanonicalHeaderKey(entry.ReplayCountLabel)
)

// header builds a request's headers with their values in one array: a
// name set again replaces its value, as http.Header.Set does. Names are
// given in canonical form.
type header struct {
	http.Header
	vals []string
}

func newHeader(n int) header {
	return header{Header: make(http.Header, n), vals: make([]string, 0, n)}
}

func (h *header) set(k, v string) {
	if cur, ok := h.Header[k]; ok && len(cur) == 1 {
		cur[0] = v
		return
	}
	h.vals = append(h.vals, v)
	n := len(h.vals)
	h.Header[k] = h.vals[n-1 : n : n]
}

// ExecTarget runs a command with the payload (or, with Stdin "entry", a
// JSON envelope naming the entry with the payload in it) on stdin and the
// key in REPLAY_IDEMPOTENCY_KEY. Exit 0 = succeeded; exit 75 (EX_TEMPFAIL) =
// certainly not done, retry; other exits = failed; killed by the timeout =
// outcome unknown.
//
// The command runs in its own process group, and the whole group is
// killed at the timeout and once the command exits, so a child it left
// in the background cannot hold the run (or serve's run slot, or its
// shutdown). Its output is capped: the record keeps the first and the
// last KiB. Its environment is the allow-list ExecEnv plus REPLAY_*
// variables, never replayctl's own (which holds CORDUM_API_KEY and the
// like).
type ExecTarget struct {
	Command []string
	Timeout time.Duration
	// Stdin is "entry" for the JSON envelope (execEnvelope), else the
	// payload.
	Stdin string
	// Context names the entry for the command (registry.ReplayContext:
	// its ref, source, scope, origin and, for a Prodigy item, the job id,
	// repository and item path): each key K is given as REPLAY_<K> and
	// in the envelope's "entry". Nil: none.
	Context func(*entry.Entry) map[string]string
}

// ExitTempFail asks for a retry.
const ExitTempFail = 75

// ExecEnv lists the variables of replayctl's environment an exec target
// sees, besides every REPLAY_* one and the three it is given: REPLAY_IDEMPOTENCY_KEY,
// REPLAY_ENTRY_ID and REPLAY_ATTEMPT, with the entry's context
// (ExecTarget.Context) as REPLAY_ENTRY_REF, REPLAY_SOURCE, REPLAY_SCOPE,
// REPLAY_ORIGIN and, for a Prodigy item, REPLAY_JOB_ID, REPLAY_REPO and
// REPLAY_ITEM_PATH (and REPLAY_ENCODING=percent when one of them had to
// be percent-encoded, see connector.Encode).
var ExecEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TZ", "LANG", "LC_ALL", "LC_CTYPE"}

// execWaitDelay is how long the command's pipes may stay open after it
// (or its group) was killed or exited.
const execWaitDelay = 2 * time.Second

// execKeep is how much of the start and of the end of the output the
// record keeps.
const execKeep = 1 << 10

// Dispatch runs the command once.
func (t *ExecTarget) Dispatch(ctx context.Context, r connector.Request) connector.Result {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.Command[0], t.Command[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = execWaitDelay
	var rc map[string]string
	if t.Context != nil {
		rc = t.Context(r.Entry)
	}
	stdin, err := execStdin(t.Stdin, r, rc)
	if err != nil {
		return connector.Result{Outcome: connector.NotSent, Detail: "not sent: " + err.Error()}
	}
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = execEnv(os.Environ(), r, rc)
	out := &headTail{}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	if cmd.Process != nil {
		// Whatever it left behind in its group goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	detail := out.String()
	if ps := cmd.ProcessState; ps != nil && ps.Exited() {
		// It ended by itself; what it left behind (and was killed) does
		// not change what it said.
		if err != nil && ps.Success() {
			detail = strings.TrimSpace(detail + " (a process it left running was killed)")
		}
		switch code := ps.ExitCode(); code {
		case 0:
			return connector.Result{Outcome: connector.Succeeded, Detail: detail}
		case ExitTempFail:
			return connector.Result{Outcome: connector.Retry, Status: code, Detail: fmt.Sprintf("exit %d: %s", code, detail)}
		default:
			return connector.Result{Outcome: connector.Failed, Status: code, Detail: fmt.Sprintf("exit %d: %s", code, detail)}
		}
	}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return connector.Result{Outcome: connector.Unknown, Detail: "command killed before it finished: " + ctx.Err().Error()}
	case errors.As(err, &ee):
		return connector.Result{Outcome: connector.Failed, Status: ee.ExitCode(), Detail: fmt.Sprintf("exit %d: %s", ee.ExitCode(), detail)}
	}
	// It never ran, so nothing was done.
	return connector.Result{Outcome: connector.NotSent, Detail: "not sent: command did not start: " + err.Error()}
}

// execEnv is the allow-listed part of environ plus the replay's own
// variables (the key, the id, the attempt and the entry's context rc),
// encoded where needed, with no NUL anywhere.
func execEnv(environ []string, r connector.Request, rc map[string]string) []string {
	allowed := map[string]bool{}
	for _, k := range ExecEnv {
		allowed[k] = true
	}
	key, k := connector.Encode(r.Key)
	id, i := connector.Encode(r.Entry.ID)
	ours := []string{"REPLAY_IDEMPOTENCY_KEY=" + key, "REPLAY_ENTRY_ID=" + id, "REPLAY_ATTEMPT=" + strconv.Itoa(r.Attempt)}
	encoded := k || i
	names := map[string]bool{"REPLAY_IDEMPOTENCY_KEY": true, "REPLAY_ENTRY_ID": true, "REPLAY_ATTEMPT": true, "REPLAY_ENCODING": true}
	for _, c := range slices.Sorted(maps.Keys(rc)) {
		name := "REPLAY_" + strings.ToUpper(c)
		if names[name] || !envName(name) {
			continue
		}
		v, e := connector.Encode(rc[c])
		encoded = encoded || e
		names[name] = true
		ours = append(ours, name+"="+v)
	}
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.IndexByte(kv, 0) >= 0 || !(allowed[k] || strings.HasPrefix(k, "REPLAY_")) || names[k] {
			continue // ours below
		}
		env = append(env, kv)
	}
	env = append(env, ours...)
	if encoded {
		env = append(env, "REPLAY_ENCODING="+connector.PercentEncoding)
	}
	return env
}

// envName reports whether name is a plain environment variable name
// (letters, digits, underscore).
func envName(name string) bool {
	for _, c := range []byte(name) {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return name != ""
}

// execEnvelope is what an exec target with stdin: entry reads.
type execEnvelope struct {
	EntryID        string            `json:"entry_id"`
	Context        map[string]string `json:"entry"`
	IdempotencyKey string            `json:"idempotency_key"`
	Attempt        int               `json:"attempt"`
	Payload        json.RawMessage   `json:"payload"`
}

// execStdin is the exec target's stdin: the payload, or with mode "entry"
// the envelope naming the entry (its context rc) with the payload inside.
func execStdin(mode string, r connector.Request, rc map[string]string) ([]byte, error) {
	if mode != "entry" {
		return r.Entry.Payload, nil
	}
	p := r.Entry.Payload
	if len(p) == 0 || !json.Valid(p) {
		// Not JSON (a broker's raw bytes): carried as a JSON string.
		q, err := json.Marshal(string(p))
		if err != nil {
			return nil, err
		}
		p = q
		if len(r.Entry.Payload) == 0 {
			p = json.RawMessage("null")
		}
	}
	return json.Marshal(execEnvelope{EntryID: r.Entry.ID, Context: rc, IdempotencyKey: r.Key, Attempt: r.Attempt, Payload: p})
}

// headTail keeps the first and the last execKeep bytes written to it and
// counts the rest: a command's output is bounded in memory whatever it
// prints.
type headTail struct {
	mu      sync.Mutex
	head    []byte
	tail    []byte // ring of the last execKeep bytes past head
	skipped int64  // bytes between head and tail
}

func (w *headTail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	if room := execKeep - len(w.head); room > 0 {
		take := min(room, len(p))
		w.head = append(w.head, p[:take]...)
		p = p[take:]
	}
	if len(p) >= execKeep {
		w.skipped += int64(len(w.tail) + len(p) - execKeep)
		w.tail = append(w.tail[:0], p[len(p)-execKeep:]...)
		return n, nil
	}
	w.tail = append(w.tail, p...)
	if over := len(w.tail) - execKeep; over > 0 {
		w.skipped += int64(over)
		w.tail = append(w.tail[:0], w.tail[over:]...)
	}
	return n, nil
}

// String is the output for the record: all of it when it fits, else its
// first and last KiB around a count of what was left out.
func (w *headTail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.skipped == 0 {
		return string(bytes.TrimSpace(append(append([]byte{}, w.head...), w.tail...)))
	}
	return fmt.Sprintf("%s\n[... %d bytes left out ...]\n%s", bytes.TrimSpace(w.head), w.skipped, bytes.TrimSpace(w.tail))
}
