package pages

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/replayctl/replayctl/internal/connector/httpout"
)

// MaxPage caps one page response; a larger one is an error, not buffered.
const MaxPage = 64 << 20

// Reader reads a running system's DLQ over HTTP, one page at a time:
// the part of a live source every system shares (the base URL, the
// credentials as headers, retries with backoff, redaction). The system's
// connector owns the page URLs, the paging loop and the decoding.
// Credentials come from the environment only and never appear in errors.
type Reader struct {
	Spec, Base string
	// Kind names the system in messages.
	Kind   string
	Header http.Header
	Client *httpout.Client
	// CredentialNames are the environment variables a 401/403 points at.
	CredentialNames string
	// Retry is the backoff for 5xx and connection errors while listing;
	// tests shorten it.
	Retry func() backoff.BackOff
	// OnRetryFn, when set, hears of each failed request that will be
	// retried: a source that is down retried for a minute in silence.
	OnRetryFn func(msg string)
}

// NewReader is a reader for the system kind at base (an http(s) URL).
func NewReader(spec, kind, base string) (*Reader, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", base)
	}
	s := &Reader{Spec: spec, Kind: kind, Base: strings.TrimRight(base, "/"), Header: http.Header{},
		Client: httpout.New(30 * time.Second),
		Retry: func() backoff.BackOff {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 500*time.Millisecond, 10*time.Second, time.Minute
			return b
		}}
	if pw, ok := u.User.Password(); ok && pw != "" {
		s.Client.AddSecret(pw) // never in a message
	}
	return s, nil
}

// SetCredential sends header: value on every request and keeps value out
// of every message.
func (s *Reader) SetCredential(header, value string) {
	if value == "" {
		return
	}
	s.Header.Set(header, value)
	s.Client.AddSecret(value)
}

func (s *Reader) String() string { return s.Spec }

// OnRetry sets fn to be told, in a line naming the URL (never a
// credential), of each failed page request about to be retried.
func (s *Reader) OnRetry(fn func(msg string)) { s.OnRetryFn = fn }

// OriginPrefix starts the Origin of every entry read from this system.
func (s *Reader) OriginPrefix() string { return s.Base + "/api/" }

// Redact keeps the credentials out of msg.
func (s *Reader) Redact(msg string) string { return s.Client.Redact(msg) }

// SettleRequest sends one write-back request (Cordum's DELETE, Nexora's resolve).
// An entry already gone (404, or 409: no longer PENDING) is not an error.
func (s *Reader) SettleRequest(ctx context.Context, id, method, u string, body []byte) error {
	h := s.Header.Clone()
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	a, res := s.Client.Send(ctx, method, u, h, body, 0)
	if res != nil {
		return fmt.Errorf("write back %s: %s %s: %s", id, method, u, res.Detail)
	}
	switch {
	case a.Status >= 200 && a.Status < 300,
		a.Status == http.StatusNotFound, a.Status == http.StatusConflict:
		return nil
	}
	return fmt.Errorf("write back %s: %s %s: %s", id, method, u, s.Redact(a.Excerpt()))
}

// ErrAuth is a 401/403 while listing: never retried.
var ErrAuth = errors.New("refused")

// Get fetches one page, retrying 5xx and connection errors with backoff.
func (s *Reader) Get(ctx context.Context, u string) ([]byte, error) {
	var body []byte
	op := func() error {
		h := s.Header.Clone()
		h.Set("Accept", "application/json")
		// Never redirected: a 3xx is an answer like any other non-200.
		a, err := s.Client.Get(ctx, u, h, MaxPage)
		switch {
		case errors.Is(err, httpout.ErrTooLarge):
			return backoff.Permanent(fmt.Errorf("page larger than %d bytes", MaxPage))
		case err != nil:
			return err
		case a.Status == http.StatusUnauthorized || a.Status == http.StatusForbidden:
			return backoff.Permanent(fmt.Errorf("HTTP %d: %w: check the credentials in the environment (%s)",
				a.Status, ErrAuth, s.CredentialNames))
		case a.Status >= 500:
			return fmt.Errorf("HTTP %d%s", a.Status, BodyExcerpt(a.Body))
		case a.Redirect():
			return backoff.Permanent(errors.New(a.Excerpt()))
		case a.Status != http.StatusOK:
			return backoff.Permanent(fmt.Errorf("HTTP %d%s", a.Status, BodyExcerpt(a.Body)))
		}
		body = a.Body
		return nil
	}
	notify := func(err error, wait time.Duration) {
		if s.OnRetryFn != nil {
			s.OnRetryFn(fmt.Sprintf("%s source: GET %s: %s; retrying in %s (for up to a minute)",
				s.Kind, u, s.Redact(err.Error()), wait.Round(time.Millisecond)))
		}
	}
	if err := backoff.RetryNotify(op, backoff.WithContext(s.Retry(), ctx), notify); err != nil {
		return nil, fmt.Errorf("read %s source: GET %s: %s", s.Kind, u, s.Redact(err.Error()))
	}
	return body, nil
}

// BodyExcerpt is the start of an error answer, which says why (Nexora:
// {"error": "Persistence disabled"}, {"error": "Invalid state ..."};
// Cordum: {"error": "failed to list dlq entries"}), on one line.
func BodyExcerpt(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	if t := strings.Join(strings.Fields(string(b)), " "); t != "" {
		return ": " + t
	}
	return ""
}
