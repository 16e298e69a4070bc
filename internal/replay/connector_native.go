package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/triage"
)

// Credentials for the systems replayctl replays through. They come only
// from the environment (CORDUM_API_KEY, CORDUM_TENANT_ID, NEXORA_TOKEN),
// never from flags, and never appear in a Result's Detail.
type Credentials struct {
	CordumAPIKey   string
	CordumTenantID string // "default" when unset, as Cordum's gateway assumes
	NexoraToken    string
}

// CredentialsFromEnv reads the credentials with getenv (os.Getenv).
func CredentialsFromEnv(getenv func(string) string) Credentials {
	c := Credentials{
		CordumAPIKey:   getenv("CORDUM_API_KEY"),
		CordumTenantID: getenv("CORDUM_TENANT_ID"),
		NexoraToken:    getenv("NEXORA_TOKEN"),
	}
	if c.CordumTenantID == "" {
		c.CordumTenantID = "default"
	}
	return c
}

// nativeTarget is what the Cordum and Nexora connectors share: a base URL,
// a client and the secrets to keep out of every Detail.
type nativeTarget struct {
	base    string
	client  *http.Client
	secrets []string
}

func newNativeTarget(base string, timeout time.Duration, secrets ...string) (nativeTarget, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nativeTarget{}, fmt.Errorf("%q is not an http(s) URL", base)
	}
	h := NewHTTPTarget(base, "", timeout, nil)
	var keep []string
	for _, s := range secrets {
		if s != "" {
			keep = append(keep, s)
		}
	}
	return nativeTarget{base: strings.TrimRight(base, "/"), client: h.Client, secrets: keep}, nil
}

// redact keeps credentials out of details (a server may echo headers).
func (t *nativeTarget) redact(s string) string {
	for _, sec := range t.secrets {
		s = strings.ReplaceAll(s, sec, "[redacted]")
	}
	return s
}

// post sends one POST and reports the status and a body excerpt, or the
// outcome when there was no response: Retry when the request never left,
// Unknown when it may have reached the system.
func (t *nativeTarget) post(ctx context.Context, u string, body []byte, header http.Header) (int, []byte, *Result) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, &Result{Outcome: Failed, Detail: "bad target URL: " + t.redact(err.Error())}
	}
	req.Header = header
	req.Header.Set("Content-Type", "application/json")
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) }}
	req = req.WithContext(httptrace.WithClientTrace(ctx, trace))
	req.GetBody = nil // never resent by net/http: retries are ours, after the ledger
	resp, err := t.client.Do(req)
	if err != nil {
		if wrote.Load() {
			return 0, nil, &Result{Outcome: Unknown, Detail: "no response after the request was sent: " + t.redact(err.Error())}
		}
		return 0, nil, &Result{Outcome: Retry, Detail: "not sent: " + t.redact(err.Error())}
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, maxDetail))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, bytes.TrimSpace(excerpt), nil
}

// classify maps the statuses both systems share; gone lists the statuses
// meaning "no longer dead-lettered here".
func (t *nativeTarget) classify(status int, excerpt []byte, gone ...int) Result {
	res := Result{Status: status, Detail: t.redact(fmt.Sprintf("HTTP %d %s", status, excerpt))}
	for _, g := range gone {
		if status == g {
			res.Outcome = HandledElsewhere
			return res
		}
	}
	switch {
	case status >= 200 && status < 300:
		res.Outcome = Succeeded
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		res.Outcome = Failed
		res.Detail = "refused: check the credentials in the environment: " + res.Detail
	case status >= 500, status == http.StatusTooManyRequests, status == http.StatusRequestTimeout:
		res.Outcome = Retry
	default:
		res.Outcome = Failed
	}
	return res
}

// CordumTarget replays a Cordum DLQ entry the way Cordum's own Retry does:
// POST /api/v1/dlq/{job_id}/retry on the gateway, which rebuilds the job
// from Cordum's job store, publishes it as a new job, deletes the DLQ
// entry and answers 200 {"job_id": NEW}; 404 when the entry is no longer
// in the DLQ (cordum-io/cordum core/controlplane/gateway handlers_dlq.go).
// Auth: X-API-Key and X-Tenant-ID.
type CordumTarget struct {
	nativeTarget
	apiKey, tenant string
}

// NewCordumTarget returns a target for the gateway at base.
func NewCordumTarget(base string, timeout time.Duration, c Credentials) (*CordumTarget, error) {
	nt, err := newNativeTarget(base, timeout, c.CordumAPIKey)
	if err != nil {
		return nil, fmt.Errorf("cordum target: %w", err)
	}
	tenant := c.CordumTenantID
	if tenant == "" {
		tenant = "default"
	}
	return &CordumTarget{nativeTarget: nt, apiKey: c.CordumAPIKey, tenant: tenant}, nil
}

func (t *CordumTarget) header() http.Header {
	h := http.Header{}
	if t.apiKey != "" {
		h.Set("X-API-Key", t.apiKey)
	}
	h.Set("X-Tenant-ID", t.tenant)
	return h
}

// Dispatch asks Cordum to retry the job.
func (t *CordumTarget) Dispatch(ctx context.Context, r Request) Result {
	u := t.base + "/api/v1/dlq/" + url.PathEscape(r.Entry.ID) + "/retry"
	h := t.header()
	h.Set("Idempotency-Key", r.Key)
	status, excerpt, res := t.post(ctx, u, nil, h)
	if res != nil {
		return *res
	}
	out := t.classify(status, excerpt, http.StatusNotFound)
	if out.Outcome == HandledElsewhere {
		out.Detail = "cordum: job " + r.Entry.ID + " is no longer in the DLQ (retried or deleted elsewhere): " + out.Detail
	}
	if out.Outcome == Succeeded {
		out.SourceUpdated = true
		var body struct {
			JobID string `json:"job_id"`
		}
		if json.Unmarshal(excerpt, &body) == nil && body.JobID != "" {
			out.NewJobID = body.JobID
			out.Detail = "cordum: retried as job " + body.JobID
		}
	}
	return out
}

// NexoraTarget replays a Nexora dead letter through the observability
// server: POST /api/dead-letters/{id}/replay resubmits Intent(goal,
// context) and marks the record REPLAYED; 202 {"accepted": true,
// "deadLetterId"}; 409 when the record is not PENDING; 404 when unknown
// (iamvirul/nexora nexora-cli ObserveCommand.java, DeadLetterRecord.java).
// NEXORA_TOKEN, when set, is sent as a bearer token.
type NexoraTarget struct {
	nativeTarget
	token string
}

// NewNexoraTarget returns a target for the server at base.
func NewNexoraTarget(base string, timeout time.Duration, c Credentials) (*NexoraTarget, error) {
	nt, err := newNativeTarget(base, timeout, c.NexoraToken)
	if err != nil {
		return nil, fmt.Errorf("nexora target: %w", err)
	}
	return &NexoraTarget{nativeTarget: nt, token: c.NexoraToken}, nil
}

func (t *NexoraTarget) header() http.Header {
	h := http.Header{}
	if t.token != "" {
		h.Set("Authorization", "Bearer "+t.token)
	}
	return h
}

// Dispatch asks Nexora to replay the dead letter.
func (t *NexoraTarget) Dispatch(ctx context.Context, r Request) Result {
	u := t.base + "/api/dead-letters/" + url.PathEscape(r.Entry.ID) + "/replay"
	h := t.header()
	h.Set("Idempotency-Key", r.Key)
	status, excerpt, res := t.post(ctx, u, nil, h)
	if res != nil {
		return *res
	}
	out := t.classify(status, excerpt, http.StatusConflict, http.StatusNotFound)
	if out.Outcome == HandledElsewhere {
		out.Detail = "nexora: dead letter " + r.Entry.ID + " is no longer PENDING (replayed, resolved or removed elsewhere): " + out.Detail
	}
	out.SourceUpdated = out.Outcome == Succeeded
	return out
}

// ParseTarget builds the route for a --target value: cordum:URL,
// nexora:URL, or a plain http(s) URL (with probe, its compensating read).
func ParseTarget(spec, probe string, c Credentials) (*Route, error) {
	kind, rest, _ := strings.Cut(spec, ":")
	switch kind {
	case "cordum":
		t, err := NewCordumTarget(rest, 0, c)
		if err != nil {
			return nil, err
		}
		return &Route{Name: spec, Dispatcher: t}, nil
	case "nexora":
		t, err := NewNexoraTarget(rest, 0, c)
		if err != nil {
			return nil, err
		}
		return &Route{Name: spec, Dispatcher: t}, nil
	}
	h := NewHTTPTarget(spec, probe, 0, nil)
	rt := &Route{Name: spec, Dispatcher: h}
	if probe != "" {
		rt.Prober = h
	}
	return rt, nil
}

// nativeRoute builds a rules.yaml cordum:/nexora: target, or nil for
// other kinds. Credentials come from the environment.
func nativeRoute(t *triage.Target) Dispatcher {
	var d Dispatcher
	var err error
	switch c := CredentialsFromEnv(os.Getenv); {
	case t.Cordum != nil:
		d, err = NewCordumTarget(t.Cordum.URL, t.Cordum.Timeout, c)
	case t.Nexora != nil:
		d, err = NewNexoraTarget(t.Nexora.URL, t.Nexora.Timeout, c)
	default:
		return nil
	}
	if err != nil {
		// Validation rejects bad URLs before here; fail every dispatch
		// rather than send anywhere else.
		return brokenTarget{err}
	}
	return d
}

type brokenTarget struct{ err error }

func (b brokenTarget) Dispatch(context.Context, Request) Result {
	return Result{Outcome: Failed, Detail: b.err.Error()}
}

// liveSource is a source that reads a running Cordum or Nexora (consumer
// side of source's live sources): it names the target that replays its
// entries through the system and how its entries' Origin starts.
type liveSource interface {
	NativeTarget() string
	OriginPrefix() string
}

// LiveRouter sends entries read from a live Cordum or Nexora source
// through that system's own replay endpoint, and everything else to Next.
// An explicit --target (Override) wins over it.
type LiveRouter struct {
	Next     Router
	Override bool
	live     []liveRoute
}

type liveRoute struct {
	prefix, kind string
	route        Route
}

// NewLiveRouter wraps next with a route per live source in srcs.
func NewLiveRouter(next Router, override bool, c Credentials, srcs ...any) (*LiveRouter, error) {
	r := &LiveRouter{Next: next, Override: override}
	for _, s := range srcs {
		ls, ok := s.(liveSource)
		if !ok {
			continue
		}
		rt, err := ParseTarget(ls.NativeTarget(), "", c)
		if err != nil {
			return nil, err
		}
		kind, _, _ := strings.Cut(ls.NativeTarget(), ":")
		r.live = append(r.live, liveRoute{prefix: ls.OriginPrefix(), kind: kind, route: *rt})
	}
	return r, nil
}

// Route implements Router.
func (r *LiveRouter) Route(e *entry.Entry) (Route, bool) {
	if !r.Override {
		for _, l := range r.live {
			if e.Source == l.kind && strings.HasPrefix(e.Origin, l.prefix) {
				return l.route, true
			}
		}
	}
	return r.Next.Route(e)
}
