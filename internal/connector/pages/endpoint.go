package pages

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/httpout"
)

// Endpoint is a running system's HTTP API as its connector replays,
// probes and settles through it: a base URL and the one outbound client,
// which keeps the secrets out of every Detail.
type Endpoint struct {
	Base   string
	client *httpout.Client
}

func NewEndpoint(base string, timeout time.Duration, secrets ...string) (Endpoint, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Endpoint{}, fmt.Errorf("%q is not an http(s) URL", base)
	}
	c := httpout.New(timeout, secrets...)
	if pw, ok := u.User.Password(); ok {
		c.AddSecret(pw)
	}
	return Endpoint{Base: strings.TrimRight(base, "/"), client: c}, nil
}

// Redact keeps credentials out of details (a server may echo headers).
func (t *Endpoint) Redact(s string) string { return t.client.Redact(s) }

// Post sends one POST and reports the status and a body excerpt, or the
// outcome when there was no response: NotSent when the request was not
// written in full, Unknown when it may have reached the system.
func (t *Endpoint) Post(ctx context.Context, u string, body []byte, header http.Header) (httpout.Answer, *connector.Result) {
	header.Set("Content-Type", "application/json")
	return t.client.Send(ctx, http.MethodPost, u, header, body, 0)
}

// Classify maps the statuses both systems share; gone lists the statuses
// meaning "no longer dead-lettered here".
func (t *Endpoint) Classify(a httpout.Answer, gone ...int) connector.Result {
	status := a.Status
	res := connector.Result{Status: status, Detail: t.Redact(a.Excerpt()), TargetDown: httpout.TargetDownStatus(status)}
	for _, g := range gone {
		if status == g {
			res.Outcome = connector.HandledElsewhere
			return res
		}
	}
	switch {
	case status >= 200 && status < 300:
		res.Outcome = connector.Succeeded
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		res.Outcome = connector.Failed
		res.Detail = "refused: check the credentials in the environment: " + res.Detail
	case status >= 500, status == http.StatusTooManyRequests, status == http.StatusRequestTimeout:
		res.Outcome = connector.Retry
	default:
		res.Outcome = connector.Failed
	}
	return res
}

// Replay POSTs to the system's own replay endpoint (path under base) with
// the entry's idempotency key, and classifies the answer; gone lists the
// statuses that mean "no longer dead-lettered", explained by goneDetail.
// It returns the response excerpt for the caller's own fields.
func (t *Endpoint) Replay(ctx context.Context, path string, h http.Header, key, goneDetail string, gone ...int) (connector.Result, []byte) {
	h.Set("Idempotency-Key", connector.HeaderValue(key))
	a, res := t.Post(ctx, t.Base+path, nil, h)
	if res != nil {
		return *res, nil
	}
	out := t.Classify(a, gone...)
	if out.Outcome == connector.HandledElsewhere {
		out.Detail = goneDetail + out.Detail
	}
	return out, a.Body
}

// MaxProbePages bounds a compensating read's scan of a DLQ.
const MaxProbePages = 1000

// GetJSON fetches one JSON page for a probe, never following a redirect.
func (t *Endpoint) GetJSON(ctx context.Context, u string, h http.Header, v any) error {
	a, err := t.client.Get(ctx, u, h, 64<<20)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if a.Status != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, t.Redact(a.Excerpt()))
	}
	if err := json.Unmarshal(a.Body, v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}
