package replay

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/triage"
)

// The types the runner shares with connectors live in internal/connector.
type (
	Outcome     = connector.Outcome
	Request     = connector.Request
	Result      = connector.Result
	Dispatcher  = connector.Dispatcher
	ProbeResult = connector.ProbeResult
	Prober      = connector.Prober
	EntryProber = connector.EntryProber
)

// Outcomes and probe results (see internal/connector).
const (
	Succeeded         = connector.Succeeded
	Failed            = connector.Failed
	Retry             = connector.Retry
	Unknown           = connector.Unknown
	HandledElsewhere  = connector.HandledElsewhere
	NotSent           = connector.NotSent
	ProbeCommitted    = connector.ProbeCommitted
	ProbeNotCommitted = connector.ProbeNotCommitted
	ProbeInconclusive = connector.ProbeInconclusive
)

// sendTrace tells whether a request was written in full: only then may
// it have reached the target. A request that failed before or while being
// written (dial, DNS, TLS handshake, a write error) provably did not,
// since the target cannot act on a request it did not get whole.
type sendTrace struct{ wrote atomic.Bool }

func (s *sendTrace) with(req *http.Request) *http.Request {
	trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
		if info.Err == nil {
			s.wrote.Store(true)
		}
	}}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
}

// noAnswer is the result of a request that got no response: not_sent when
// it was not written in full, outcome_unknown when it was.
func (s *sendTrace) noAnswer(err error, redact func(string) string) Result {
	down := targetDownErr(err)
	if s.wrote.Load() {
		return Result{Outcome: Unknown, TargetDown: down, Detail: "no response after the request was sent: " + redact(err.Error())}
	}
	return Result{Outcome: NotSent, TargetDown: down, Detail: "not sent: " + redact(err.Error())}
}

// targetDownErr: connection refused or a timeout (the breaker's signals).
func targetDownErr(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}

// targetDownStatus: gateway statuses say the target behind it is down.
func targetDownStatus(code int) bool {
	return code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

func noRedact(s string) string { return s }

// HTTPTarget posts payloads to a URL.
type HTTPTarget struct {
	URL      string
	ProbeURL string
	Headers  map[string]string
	Client   *http.Client
}

// NewHTTPTarget returns a target with its own keep-alive client.
func NewHTTPTarget(u, probe string, timeout time.Duration, headers map[string]string) *HTTPTarget {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
	}
	return &HTTPTarget{URL: u, ProbeURL: probe, Headers: headers, Client: &http.Client{Timeout: timeout, Transport: tr}}
}

const maxDetail = 512

// Dispatch POSTs the payload with the idempotency headers.
func (t *HTTPTarget) Dispatch(ctx context.Context, r Request) Result {
	body := []byte(r.Entry.Payload)
	if len(body) == 0 {
		body = []byte("null")
	}
	req, err := http.NewRequest(http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return Result{Outcome: Failed, Detail: "bad target URL: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range t.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Idempotency-Key", r.Key)
	req.Header.Set("X-Replay-Entry-Id", r.Entry.ID)
	req.Header.Set("X-Replay-Attempt", strconv.Itoa(r.Attempt))
	// The lineage stamp (issue 27): a message that fails again and comes
	// back carrying it is linked to this entry (entry.LineageOf).
	req.Header.Set(entry.LineageLabel, cmp.Or(r.Entry.LineageOf(), r.Entry.Ref()))
	req.Header.Set(entry.ReplayCountLabel, strconv.Itoa(r.Attempt))
	// Whether the request was written in full decides between "certainly
	// not committed" (not_sent) and "may have happened" (unknown).
	var sent sendTrace
	req = sent.with(req.WithContext(ctx))
	// net/http resends a request with an Idempotency-Key header by itself
	// when a reused connection drops after sending it: a blind retry of a
	// key whose outcome is unknown. Without GetBody it cannot rewind the
	// body, so it never resends; retries are ours, after the ledger.
	req.GetBody = nil
	resp, err := t.Client.Do(req)
	if err != nil {
		return sent.noAnswer(err, noRedact)
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, maxDetail))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // reuse the connection
	res := Result{Status: resp.StatusCode, Detail: fmt.Sprintf("HTTP %d %s", resp.StatusCode, bytes.TrimSpace(excerpt)),
		TargetDown: targetDownStatus(resp.StatusCode)}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300, resp.StatusCode == http.StatusConflict:
		res.Outcome = Succeeded
	case resp.StatusCode >= 500:
		res.Outcome = Retry
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout:
		res.Outcome = Retry // the target says it did not take it, try later
	default:
		res.Outcome = Failed
	}
	return res
}

// Probe GETs the probe URL with the key (query parameter and header).
func (t *HTTPTarget) Probe(ctx context.Context, key string) (ProbeResult, string) {
	u, err := url.Parse(t.ProbeURL)
	if err != nil {
		return ProbeInconclusive, "bad probe URL: " + err.Error()
	}
	q := u.Query()
	q.Set("key", key)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return ProbeInconclusive, err.Error()
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := t.Client.Do(req)
	if err != nil {
		return ProbeInconclusive, "probe failed: " + err.Error()
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK:
		return ProbeCommitted, "probe HTTP 200: committed"
	case http.StatusNotFound:
		return ProbeNotCommitted, "probe HTTP 404: not committed"
	}
	return ProbeInconclusive, fmt.Sprintf("probe HTTP %d: inconclusive", resp.StatusCode)
}

// ExecTarget runs a command with the payload on stdin and the key in
// REPLAY_IDEMPOTENCY_KEY. Exit 0 = succeeded; exit 75 (EX_TEMPFAIL) =
// certainly not done, retry; other exits = failed; killed by the timeout =
// outcome unknown.
type ExecTarget struct {
	Command []string
	Timeout time.Duration
	// Stdin is "entry" for the JSON envelope (exec_context.go), else the
	// payload.
	Stdin string
}

// ExitTempFail asks for a retry.
const ExitTempFail = 75

// Dispatch runs the command once.
func (t *ExecTarget) Dispatch(ctx context.Context, r Request) Result {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.Command[0], t.Command[1:]...)
	stdin, err := execStdin(t.Stdin, r)
	if err != nil {
		return Result{Outcome: NotSent, Detail: "not sent: " + err.Error()}
	}
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = append(os.Environ(),
		"REPLAY_IDEMPOTENCY_KEY="+r.Key,
		"REPLAY_ENTRY_ID="+r.Entry.ID,
		"REPLAY_ATTEMPT="+strconv.Itoa(r.Attempt))
	cmd.Env = append(cmd.Env, execEnv(r)...) // exec_context.go
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	detail := string(bytes.TrimSpace(out.Bytes()))
	if len(detail) > maxDetail {
		detail = detail[:maxDetail]
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return Result{Outcome: Succeeded, Detail: detail}
	case ctx.Err() != nil:
		return Result{Outcome: Unknown, Detail: "command killed before it finished: " + ctx.Err().Error()}
	case errors.As(err, &ee):
		res := Result{Status: ee.ExitCode(), Detail: fmt.Sprintf("exit %d: %s", ee.ExitCode(), detail)}
		res.Outcome = Failed
		if ee.ExitCode() == ExitTempFail {
			res.Outcome = Retry
		}
		return res
	}
	// It never ran, so nothing was done.
	return Result{Outcome: NotSent, Detail: "not sent: command did not start: " + err.Error()}
}

// Route is where one entry's replays go.
type Route struct {
	Name       string
	Dispatcher Dispatcher
	Prober     Prober // nil: no compensating read
}

// Router finds an entry's route; ok is false when no target is configured.
type Router interface {
	Route(e *entry.Entry) (Route, bool)
}

// RulesRouter routes by rules.yaml targets, or sends everything to Default
// when set (--target URL).
type RulesRouter struct {
	Rules   *triage.Rules
	Default *Route
	built   map[*triage.Target]Route
}

// NewRulesRouter builds every target's dispatcher once.
func NewRulesRouter(rules *triage.Rules, def *Route) *RulesRouter {
	r := &RulesRouter{Rules: rules, Default: def, built: map[*triage.Target]Route{}}
	for i := range rules.Targets {
		t := &rules.Targets[i]
		rt := Route{Name: t.TargetName()}
		if native := nativeRoute(t); native != nil {
			rt.Dispatcher = native
			rt.Prober, _ = native.(Prober)
		} else if t.HTTP != nil {
			h := NewHTTPTarget(t.HTTP.URL, t.HTTP.Probe, t.HTTP.Timeout, t.HTTP.Headers)
			rt.Dispatcher = h
			if t.HTTP.Probe != "" {
				rt.Prober = h
			}
		} else {
			rt.Dispatcher = &ExecTarget{Command: t.Exec.Command, Timeout: t.Exec.Timeout, Stdin: t.Exec.Stdin}
		}
		r.built[t] = rt
	}
	return r
}

// Route implements Router.
func (r *RulesRouter) Route(e *entry.Entry) (Route, bool) {
	if r.Default != nil {
		return *r.Default, true
	}
	t := r.Rules.TargetFor(e)
	if t == nil {
		return Route{}, false
	}
	return r.built[t], true
}
