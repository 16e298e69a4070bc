package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/replayctl/replayctl/internal/entry"
)

// livePageSize is how many entries one Nexora request asks for: Nexora
// caps its page size at 100 (ObserveCommand.java).
const livePageSize = 100

// cordumPageSize is how many entries one Cordum request asks for: the
// gateway's ceiling (cordum-io/cordum core/controlplane/gateway/helpers.go
// maxListLimit = 500, applied by clampListLimit in handlers_dlq.go). The larger the page, the more entries failing
// within one second its whole-second cursor can page past.
const cordumPageSize = 500

// maxPage caps one page response; a larger one is an error, not buffered.
const maxPage = 64 << 20

// liveSource reads a running system's DLQ over HTTP, page by page:
// Cordum's gateway (GET /api/v1/dlq/page?limit=&cursor=, following
// next_cursor; cordum-io/cordum core/controlplane/gateway handlers_dlq.go)
// or Nexora's observability server (GET /api/dead-letters?state=PENDING
// &page=N&size=M; iamvirul/nexora nexora-cli ObserveCommand.java).
// Credentials come from the environment only and never appear in errors.
type liveSource struct {
	spec, base string
	format     format
	header     http.Header
	secrets    []string
	client     *http.Client
	// retry is the backoff for 5xx and connection errors while listing;
	// tests shorten it.
	retry func() backoff.BackOff
	// onRetry, when set, hears of each failed request that will be retried:
	// a source that is down retried for a minute in silence.
	onRetry func(msg string)
	// tenants are the Cordum tenants read (CORDUM_TENANT_ID, a comma
	// list); notes what the last read could not see (live_cordum.go).
	tenants []string
	notes   *cordumNotes
}

// OnRetry sets fn to be told, in a line naming the URL (never a
// credential), of each failed page request about to be retried.
func (s *liveSource) OnRetry(fn func(msg string)) { s.onRetry = fn }

// newLiveSource is a live source for kind (cordum or nexora) at base.
func newLiveSource(spec, kind, base string, getenv func(string) string) (*liveSource, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", base)
	}
	s := &liveSource{spec: spec, base: strings.TrimRight(base, "/"), header: http.Header{}, notes: &cordumNotes{},
		client: &http.Client{Timeout: 30 * time.Second},
		retry: func() backoff.BackOff {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 500*time.Millisecond, 10*time.Second, time.Minute
			return b
		}}
	if pw, ok := u.User.Password(); ok && pw != "" {
		s.secrets = append(s.secrets, pw) // never in a message
	}
	switch kind {
	case entry.KindCordum:
		s.format = cordumFormat()
		key, tenants := getenv("CORDUM_API_KEY"), CordumTenants(getenv("CORDUM_TENANT_ID"))
		tenant := tenants[0]
		s.tenants = tenants
		if key != "" {
			s.header.Set("X-API-Key", key)
			s.secrets = append(s.secrets, key)
		}
		s.header.Set("X-Tenant-ID", tenant)
	case entry.KindNexora:
		s.format = nexoraFormat()
		if tok := getenv("NEXORA_TOKEN"); tok != "" {
			s.header.Set("Authorization", "Bearer "+tok)
			s.secrets = append(s.secrets, tok)
		}
	}
	return s, nil
}

func (s *liveSource) String() string { return s.spec }

// NativeTarget is the --target value that replays this source's entries
// through the system's own endpoint (cordum:URL or nexora:URL).
func (s *liveSource) NativeTarget() string { return s.format.kind + ":" + s.base }

// OriginPrefix starts the Origin of every entry this source yields.
func (s *liveSource) OriginPrefix() string { return s.base + "/api/" }

func (s *liveSource) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	if s.format.kind == entry.KindNexora {
		return s.nexoraEntries(ctx)
	}
	return s.cordumEntries(ctx) // live_cordum.go
}

// pageURL is the URL of Cordum's page at cursor.
func (s *liveSource) pageURL(cursor string) string {
	q := url.Values{"limit": {strconv.Itoa(cordumPageSize)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return s.base + "/api/v1/dlq/page?" + q.Encode()
}

// next says whether another Cordum page follows, and its cursor.
func (s *liveSource) next(body []byte, n int) (string, bool, error) {
	if n == 0 {
		return "", false, nil
	}
	var p struct {
		NextCursor json.RawMessage `json:"next_cursor"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return "", false, fmt.Errorf("page is not a JSON object: %w", err)
	}
	c := strings.Trim(string(bytes.TrimSpace(p.NextCursor)), `"`)
	if c == "" || c == "null" || c == "0" {
		if n >= cordumPageSize {
			// A full page and no cursor: the gateway sends none when the
			// page's last entry has no created_at (cordum-io/cordum
			// core/controlplane/gateway/handlers_dlq.go:82-89), and such
			// entries score lowest in dlq:index: more may follow.
			return "", false, fmt.Errorf("no next_cursor after a full page of %d entries (its last entry has no created_at): the gateway cannot page past it and more entries may follow; read them with --source cordum-redis:redis://HOST:PORT/DB", n)
		}
		return "", false, nil
	}
	return c, true, nil
}

// errAuth is a 401/403 while listing: never retried.
var errAuth = errors.New("refused")

// get fetches one page, retrying 5xx and connection errors with backoff.
func (s *liveSource) get(ctx context.Context, u string) ([]byte, error) {
	var body []byte
	op := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return backoff.Permanent(err)
		}
		req.Header = s.header.Clone()
		req.Header.Set("Accept", "application/json")
		resp, err := s.client.Do(req)
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // the message names the URL once, not twice
		}
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			return backoff.Permanent(fmt.Errorf("HTTP %d: %w: check the credentials in the environment (%s)",
				resp.StatusCode, errAuth, s.credentialNames()))
		case resp.StatusCode >= 500:
			return fmt.Errorf("HTTP %d%s", resp.StatusCode, bodyExcerpt(resp.Body))
		case resp.StatusCode != http.StatusOK:
			return backoff.Permanent(fmt.Errorf("HTTP %d%s", resp.StatusCode, bodyExcerpt(resp.Body)))
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxPage+1))
		if err != nil {
			return err
		}
		if len(b) > maxPage {
			return backoff.Permanent(fmt.Errorf("page larger than %d bytes", maxPage))
		}
		body = b
		return nil
	}
	notify := func(err error, wait time.Duration) {
		if s.onRetry != nil {
			s.onRetry(fmt.Sprintf("%s source: GET %s: %s; retrying in %s (for up to a minute)",
				s.format.kind, u, s.redact(err.Error()), wait.Round(time.Millisecond)))
		}
	}
	if err := backoff.RetryNotify(op, backoff.WithContext(s.retry(), ctx), notify); err != nil {
		return nil, fmt.Errorf("read %s source: GET %s: %s", s.format.kind, u, s.redact(err.Error()))
	}
	return body, nil
}

// bodyExcerpt is the start of an error answer, which says why (Nexora:
// {"error": "Persistence disabled"}, {"error": "Invalid state ..."};
// Cordum: {"error": "failed to list dlq entries"}), on one line.
func bodyExcerpt(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, 200))
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 1<<16))
	if t := strings.Join(strings.Fields(string(b)), " "); t != "" {
		return ": " + t
	}
	return ""
}

func (s *liveSource) credentialNames() string {
	if s.format.kind == entry.KindCordum {
		return "CORDUM_API_KEY, CORDUM_TENANT_ID"
	}
	return "NEXORA_TOKEN"
}

func (s *liveSource) redact(msg string) string {
	for _, sec := range s.secrets {
		msg = strings.ReplaceAll(msg, sec, "[redacted]")
	}
	return msg
}

// MarkReplayed takes an entry replayed elsewhere out of the system's DLQ
// the way the system itself does: Cordum's gateway DELETE
// /api/v1/dlq/{job_id} (204; handlers_dlq.go handleDeleteDLQ), Nexora's
// POST /api/dead-letters/{id}/resolve {"reason"} (ObserveCommand.java).
// An entry already gone (404, or 409: no longer PENDING) is not an error.
func (s *liveSource) MarkReplayed(ctx context.Context, e entry.Entry) error {
	return s.MarkResolved(ctx, e, "replayed by replayctl")
}

// MarkResolved is MarkReplayed carrying a person's resolve reason, which
// Nexora keeps on the record (Cordum's DELETE takes none).
func (s *liveSource) MarkResolved(ctx context.Context, e entry.Entry, reason string) error {
	method, u, body := http.MethodDelete, s.base+"/api/v1/dlq/"+url.PathEscape(e.ID), []byte(nil)
	if s.format.kind == entry.KindNexora {
		method, u = http.MethodPost, s.base+"/api/dead-letters/"+url.PathEscape(e.ID)+"/resolve"
		body, _ = json.Marshal(map[string]string{"reason": reason})
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = s.header.Clone()
	if t := e.Labels[CordumTenantLabel]; t != "" && s.format.kind == entry.KindCordum {
		req.Header.Set("X-Tenant-ID", t) // the entry's own tenant (live_cordum.go)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("write back %s: %s %s: %s", e.ID, method, u, s.redact(err.Error()))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300,
		resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusConflict:
		return nil
	}
	return fmt.Errorf("write back %s: %s %s: HTTP %d", e.ID, method, u, resp.StatusCode)
}

var _ Resolver = (*liveSource)(nil)
