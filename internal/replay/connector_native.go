package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
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
// outcome when there was no response: NotSent when the request was not
// written in full, Unknown when it may have reached the system.
func (t *nativeTarget) post(ctx context.Context, u string, body []byte, header http.Header) (int, []byte, *Result) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, &Result{Outcome: Failed, Detail: "bad target URL: " + t.redact(err.Error())}
	}
	req.Header = header
	req.Header.Set("Content-Type", "application/json")
	var sent sendTrace
	req = sent.with(req)
	req.GetBody = nil // never resent by net/http: retries are ours, after the ledger
	resp, err := t.client.Do(req)
	if err != nil {
		res := sent.noAnswer(err, t.redact)
		return 0, nil, &res
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, maxDetail))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, bytes.TrimSpace(excerpt), nil
}

// classify maps the statuses both systems share; gone lists the statuses
// meaning "no longer dead-lettered here".
func (t *nativeTarget) classify(status int, excerpt []byte, gone ...int) Result {
	res := Result{Status: status, Detail: t.redact(fmt.Sprintf("HTTP %d %s", status, excerpt)), TargetDown: targetDownStatus(status)}
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

// replay POSTs to the system's own replay endpoint (path under base) with
// the entry's idempotency key, and classifies the answer; gone lists the
// statuses that mean "no longer dead-lettered", explained by goneDetail.
// It returns the response excerpt for the caller's own fields.
func (t *nativeTarget) replay(ctx context.Context, path string, h http.Header, key, goneDetail string, gone ...int) (Result, []byte) {
	h.Set("Idempotency-Key", key)
	status, excerpt, res := t.post(ctx, t.base+path, nil, h)
	if res != nil {
		return *res, nil
	}
	out := t.classify(status, excerpt, gone...)
	if out.Outcome == HandledElsewhere {
		out.Detail = goneDetail + out.Detail
	}
	return out, excerpt
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
	out, excerpt := t.replay(ctx, "/api/v1/dlq/"+url.PathEscape(r.Entry.ID)+"/retry", t.header(), r.Key,
		"cordum: job "+r.Entry.ID+" is no longer in the DLQ (retried or deleted elsewhere): ", http.StatusNotFound)
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
	out, _ := t.replay(ctx, "/api/dead-letters/"+url.PathEscape(r.Entry.ID)+"/replay", t.header(), r.Key,
		"nexora: dead letter "+r.Entry.ID+" is no longer PENDING (replayed, resolved or removed elsewhere): ",
		http.StatusConflict, http.StatusNotFound)
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
		return &Route{Name: spec, Dispatcher: t, Prober: t}, nil
	case "nexora":
		t, err := NewNexoraTarget(rest, 0, c)
		if err != nil {
			return nil, err
		}
		return &Route{Name: spec, Dispatcher: t, Prober: t}, nil
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
	brokers  []brokerRoute
}

type liveRoute struct {
	prefix, kind string
	route        Route
}

// NewLiveRouter wraps next with a route per live source in srcs.
func NewLiveRouter(next Router, override bool, c Credentials, srcs ...any) (*LiveRouter, error) {
	r := &LiveRouter{Next: next, Override: override}
	for _, s := range srcs {
		if b, ok := s.(brokerSource); ok {
			// A broker connector replays through itself (issue 28).
			kind, _, _ := strings.Cut(b.Origin(), ":")
			r.brokers = append(r.brokers, brokerRoute{origin: b.Origin(), kind: kind,
				route: Route{Name: b.Origin(), Dispatcher: replayDispatcher{b}}})
			continue
		}
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
		for _, b := range r.brokers {
			if e.Source == b.kind && e.Origin == b.origin {
				return b.route, true
			}
		}
	}
	return r.Next.Route(e)
}

// brokerSource is a message broker's connector (RabbitMQ, Kafka, SQS):
// it replays its own entries, back where each message came from; its
// entries' Origin is its own.
type brokerSource interface {
	Origin() string
	Replay(ctx context.Context, r Request) Result
}

type brokerRoute struct {
	origin, kind string
	route        Route
}

// replayDispatcher dispatches through a connector's Replay.
type replayDispatcher struct{ b brokerSource }

func (d replayDispatcher) Dispatch(ctx context.Context, r Request) Result { return d.b.Replay(ctx, r) }

// maxProbePages bounds a compensating read's scan of a DLQ.
const maxProbePages = 1000

// get fetches one JSON page for a probe.
func (t *nativeTarget) getJSON(ctx context.Context, u string, h http.Header, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header = h
	resp, err := t.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %s", u, t.redact(err.Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// Probe cannot work from the key alone: Cordum knows jobs by id.
func (t *CordumTarget) Probe(context.Context, string) (ProbeResult, string) {
	return ProbeInconclusive, "cordum: probe needs the job id"
}

// ProbeEntry is the compensating read for Cordum: the job still in the
// DLQ (GET /api/v1/dlq/page, following next_cursor) means the retry did
// not happen; gone means it did, or a person deleted it: either way it
// must not be replayed again.
func (t *CordumTarget) ProbeEntry(ctx context.Context, e *entry.Entry) (ProbeResult, string) {
	const limit = 500 // the gateway's ceiling (gateway/helpers.go maxListLimit)
	cursor := ""
	for range maxProbePages {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Items []struct {
				JobID string `json:"job_id"`
			} `json:"items"`
			NextCursor json.RawMessage `json:"next_cursor"`
		}
		if err := t.getJSON(ctx, t.base+"/api/v1/dlq/page?"+q.Encode(), t.header(), &page); err != nil {
			return ProbeInconclusive, "cordum probe: " + err.Error()
		}
		for _, it := range page.Items {
			if it.JobID == e.ID {
				return ProbeNotCommitted, "cordum probe: job " + e.ID + " is still in the DLQ: not retried"
			}
		}
		next := strings.Trim(string(bytes.TrimSpace(page.NextCursor)), `"`)
		end := next == "" || next == "null" || next == "0"
		if end && len(page.Items) >= limit {
			// A full page and no cursor: its last entry has no created_at
			// (handlers_dlq.go:85), and the gateway cannot page past it.
			// Not the end of the DLQ: the job may be further on.
			return ProbeInconclusive, "cordum probe: the gateway gave no cursor after a full page (its last entry has no created_at): job " + e.ID + " may still be in the DLQ past it"
		}
		if len(page.Items) == 0 || end {
			return ProbeCommitted, "cordum probe: job " + e.ID + " is no longer in the DLQ: retried or deleted"
		}
		if next == cursor {
			// The cursor is an inclusive whole second: over a page of
			// entries dead-lettered in one second, the gateway answers the
			// same page again and never reaches the rest. Not the end of
			// the DLQ: the job may be among them.
			return ProbeInconclusive, "cordum probe: more than a page of entries were dead-lettered within one second, which the gateway cannot page past: job " + e.ID + " may still be in the DLQ"
		}
		cursor = next
	}
	return ProbeInconclusive, "cordum probe: DLQ too long to scan"
}

// Probe cannot work from the key alone: Nexora knows dead letters by id.
func (t *NexoraTarget) Probe(context.Context, string) (ProbeResult, string) {
	return ProbeInconclusive, "nexora: probe needs the dead-letter id"
}

// ProbeEntry is the compensating read for Nexora: the dead letter's
// reviewState (GET /api/dead-letters?state=ALL, page by page) PENDING means
// not replayed; REPLAYED, RESOLVED or gone means it must not be replayed.
func (t *NexoraTarget) ProbeEntry(ctx context.Context, e *entry.Entry) (ProbeResult, string) {
	for p := range maxProbePages {
		q := url.Values{"state": {"ALL"}, "page": {fmt.Sprint(p)}, "size": {"100"}}
		var page struct {
			Items []struct {
				ID          string `json:"id"`
				ReviewState string `json:"reviewState"`
			} `json:"items"`
		}
		if err := t.getJSON(ctx, t.base+"/api/dead-letters?"+q.Encode(), t.header(), &page); err != nil {
			return ProbeInconclusive, "nexora probe: " + err.Error()
		}
		for _, it := range page.Items {
			if it.ID != e.ID {
				continue
			}
			if strings.EqualFold(it.ReviewState, "PENDING") {
				return ProbeNotCommitted, "nexora probe: " + e.ID + " is still PENDING: not replayed"
			}
			return ProbeCommitted, "nexora probe: " + e.ID + " is " + it.ReviewState
		}
		if len(page.Items) < 100 {
			return ProbeCommitted, "nexora probe: " + e.ID + " is no longer listed"
		}
	}
	return ProbeInconclusive, "nexora probe: too many dead letters to scan"
}
