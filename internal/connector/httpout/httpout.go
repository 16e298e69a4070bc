// Package httpout is the one way a connector talks HTTP to another system:
// the HTTP target's POST and probe, Cordum's and Nexora's replay, settle
// and page reads all go through a Client.
//
// What it promises, whatever the other side answers:
//   - it never follows a redirect: a 3xx comes back as the answer, with its
//     status, and no header (an Idempotency-Key, a rules.yaml header, an API
//     key or a bearer token) is ever sent to the host it points at;
//   - it never resends a request by itself: net/http resends a request
//     with no body, or one with an Idempotency-Key and a rewindable body,
//     when a reused keep-alive connection breaks; every request here carries
//     a body that cannot be rewound, so the only retries are the runner's,
//     after the ledger. A request written in full that got no answer is
//     outcome_unknown, one not written in full is not_sent;
//   - the credentials it was given never appear in an error or a detail;
//   - every response body is read up to a bound, and every request has a
//     timeout.
//
// It must never log, never retry and never decide an outcome beyond "was
// there an answer": the status is the caller's to classify.
package httpout

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
)

// DefaultTimeout bounds one request when the caller gives none.
const DefaultTimeout = 30 * time.Second

// MaxExcerpt is how much of an answer a Result's Detail keeps.
const MaxExcerpt = 512

// maxDrain is how much more of an answer is read (and dropped) so the
// connection can be reused; a longer answer closes it instead.
const maxDrain = 1 << 20

// ErrTooLarge is wrapped by Get when the answer is longer than its bound.
var ErrTooLarge = errors.New("response larger than the limit")

// Client sends requests under the package's promises.
type Client struct {
	http    *http.Client
	secrets []string
}

// New returns a client with its own keep-alive transport, the given
// timeout per request (DefaultTimeout when <= 0), and secrets to keep out
// of every error and detail (empty ones are ignored).
func New(timeout time.Duration, secrets ...string) *Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
	}
	c := &Client{http: &http.Client{Timeout: timeout, Transport: tr, CheckRedirect: noRedirect}}
	c.AddSecret(secrets...)
	return c
}

// noRedirect hands a 3xx back as the answer: following it would send the
// request's headers to whatever host the Location names, and turn a POST
// into a GET without its body whose 2xx would look like a delivery.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// AddSecret adds values to redact (a key read after New, a URL password).
func (c *Client) AddSecret(secrets ...string) {
	for _, s := range secrets {
		if s != "" {
			c.secrets = append(c.secrets, s)
		}
	}
}

// Redact replaces every secret in s.
func (c *Client) Redact(s string) string {
	for _, sec := range c.secrets {
		s = strings.ReplaceAll(s, sec, "[redacted]")
	}
	return s
}

// Answer is a response: its status, where a 3xx pointed, and the start of
// its body.
type Answer struct {
	Status   int
	Location string // a redirect's Location, never followed
	Body     []byte // at most the bound the caller asked for
}

// Redirect reports whether the answer is a 3xx, which is never a success.
func (a Answer) Redirect() bool { return a.Status >= 300 && a.Status < 400 }

// Excerpt is the answer on one line for a Detail: "HTTP 302 (redirect to
// X, not followed)" or "HTTP 500 body...".
func (a Answer) Excerpt() string {
	if a.Redirect() {
		return fmt.Sprintf("HTTP %d (redirect to %s, not followed)", a.Status, stripUser(a.Location))
	}
	b := bytes.TrimSpace(a.Body)
	if len(b) > MaxExcerpt {
		b = b[:MaxExcerpt]
	}
	return strings.TrimSpace(fmt.Sprintf("HTTP %d %s", a.Status, b))
}

// stripUser drops a URL's user info (a Location could carry one).
func stripUser(loc string) string {
	u, err := url.Parse(loc)
	if err != nil || u.User == nil {
		return loc
	}
	u.User = nil
	return u.String()
}

// Send sends one request exactly once and reads up to max bytes of the
// answer (MaxExcerpt when max <= 0). When there was no answer it returns
// the outcome instead: NotSent when the request was not written in full
// (it cannot have reached the system), Unknown when it was.
//
// h is copied: the caller may use it again (SendOwned saves the copy).
func (c *Client) Send(ctx context.Context, method, u string, h http.Header, body []byte, max int64) (Answer, *connector.Result) {
	return c.send(ctx, method, u, h, true, body, max)
}

// SendOwned is Send with h handed to the request as it is, not copied:
// the caller must not use h (or its value slices) again. A caller that
// builds the headers of each request afresh (the HTTP target's dispatch)
// saves a copy of them per request.
func (c *Client) SendOwned(ctx context.Context, method, u string, h http.Header, body []byte, max int64) (Answer, *connector.Result) {
	return c.send(ctx, method, u, h, false, body, max)
}

func (c *Client) send(ctx context.Context, method, u string, h http.Header, clone bool, body []byte, max int64) (Answer, *connector.Result) {
	if max <= 0 {
		max = MaxExcerpt
	}
	// The trace is in the request's context from the start (no second
	// copy of the request to add it).
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		}})
	if clone && h != nil {
		h = h.Clone()
	}
	req, err := c.newRequest(ctx, method, u, h, body)
	if err != nil {
		return Answer{}, &connector.Result{Outcome: connector.Failed, Detail: "bad target URL: " + c.Redact(err.Error())}
	}
	if err := checkHeader(h); err != nil {
		// net/http would refuse it before sending, on every attempt: as
		// not_sent it would never spend the budget and stay pending for
		// ever. It is a definite failure a person must look at.
		return Answer{}, &connector.Result{Outcome: connector.Failed, Detail: "cannot be sent: " + c.Redact(err.Error())}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		down := TargetDownErr(err)
		if wrote.Load() {
			return Answer{}, &connector.Result{Outcome: connector.Unknown, TargetDown: down,
				Detail: "no response after the request was sent: " + c.Redact(err.Error())}
		}
		return Answer{}, &connector.Result{Outcome: connector.NotSent, TargetDown: down, Detail: "not sent: " + c.Redact(err.Error())}
	}
	defer resp.Body.Close()
	a := Answer{Status: resp.StatusCode, Location: resp.Header.Get("Location")}
	a.Body = readAtMost(resp.Body, max, resp.ContentLength)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain)) // reuse the connection
	return a, nil
}

// readAtMost reads up to max bytes of r, whose length is n when known
// (>= 0): an empty answer (most 2xx) costs no buffer, and a short one of
// known length one of its size.
func readAtMost(r io.Reader, max, n int64) []byte {
	switch {
	case n == 0:
		return nil
	case n > 0 && n <= max:
		b := make([]byte, n)
		k, _ := io.ReadFull(r, b)
		return b[:k]
	}
	b, _ := io.ReadAll(io.LimitReader(r, max))
	return b
}

// Get reads one answer of at most max bytes; a longer one is ErrTooLarge.
// A transport error comes back redacted; the status is the caller's.
func (c *Client) Get(ctx context.Context, u string, h http.Header, max int64) (Answer, error) {
	req, err := c.newRequest(ctx, http.MethodGet, u, h.Clone(), nil)
	if err != nil {
		return Answer{}, errors.New(c.Redact(err.Error()))
	}
	resp, err := c.http.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // the caller names the URL once, not twice
	}
	if err != nil {
		return Answer{}, &redacted{msg: c.Redact(err.Error()), err: err}
	}
	defer resp.Body.Close()
	a := Answer{Status: resp.StatusCode, Location: resp.Header.Get("Location")}
	if resp.StatusCode != http.StatusOK {
		a.Body, _ = io.ReadAll(io.LimitReader(resp.Body, 200))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return a, nil
	}
	a.Body, err = io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return Answer{}, &redacted{msg: c.Redact(err.Error()), err: err}
	}
	if int64(len(a.Body)) > max {
		return Answer{}, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
	}
	return a, nil
}

// redacted is a transport error whose message has the secrets taken out
// but which still answers errors.Is for what it wraps (a timeout, a
// refused connection).
type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// newRequest builds a request whose body net/http can never rewind, so it
// never resends it: a POST always has one (an empty one when the caller
// has none; http.NoBody, which http.NewRequest makes of an empty reader,
// would make it resendable), and GetBody is nil. h becomes the request's
// header (the callers pass a copy, or headers made for this request).
func (c *Client) newRequest(ctx context.Context, method, u string, h http.Header, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	if h != nil {
		req.Header = h
	}
	if method != http.MethodGet && method != http.MethodHead {
		// A NopCloser'd bytes.Reader is sent as an in-memory body (headers
		// and body in one write, as before); without GetBody net/http
		// cannot rewind it, so it never resends it.
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		if len(body) == 0 {
			req.ContentLength = 0 // sent as Content-Length: 0 once the transport sees it is empty
		}
		req.GetBody = nil
	}
	return req, nil
}

// checkHeader refuses what net/http refuses to send: a header name that
// is not a token, a value with a control character other than tab.
func checkHeader(h http.Header) error {
	for k, vs := range h {
		if k == "" || strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == ':' }) {
			return fmt.Errorf("header name %q is not valid", k)
		}
		for _, v := range vs {
			for i := 0; i < len(v); i++ {
				if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
					return fmt.Errorf("header %s holds a control character (byte %d)", k, i)
				}
			}
		}
	}
	return nil
}

// TargetDownErr: connection refused or a timeout (the breaker's signals).
func TargetDownErr(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}

// TargetDownStatus: gateway statuses say the target behind it is down.
func TargetDownStatus(code int) bool {
	return code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}
