package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/replayctl/replayctl/internal/connector/httpout"
	"github.com/replayctl/replayctl/internal/connector/records"
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
	format     records.Format
	header     http.Header
	client     *httpout.Client
	// retry is the backoff for 5xx and connection errors while listing;
	// tests shorten it.
	retry func() backoff.BackOff
	// onRetry, when set, hears of each failed request that will be retried:
	// a source that is down retried for a minute in silence.
	onRetry func(msg string)
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
	s := &liveSource{spec: spec, base: strings.TrimRight(base, "/"), header: http.Header{},
		client: httpout.New(30 * time.Second),
		retry: func() backoff.BackOff {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 500*time.Millisecond, 10*time.Second, time.Minute
			return b
		}}
	if pw, ok := u.User.Password(); ok && pw != "" {
		s.client.AddSecret(pw) // never in a message
	}
	switch kind {
	case entry.KindCordum:
		s.format = cordumFormat()
		key, tenant := getenv("CORDUM_API_KEY"), getenv("CORDUM_TENANT_ID")
		if tenant == "" {
			tenant = "default"
		}
		if key != "" {
			s.header.Set("X-API-Key", key)
			s.client.AddSecret(key)
		}
		s.header.Set("X-Tenant-ID", tenant)
	case entry.KindNexora:
		s.format = nexoraFormat()
		if tok := getenv("NEXORA_TOKEN"); tok != "" {
			s.header.Set("Authorization", "Bearer "+tok)
			s.client.AddSecret(tok)
		}
	}
	return s, nil
}

func (s *liveSource) String() string { return s.spec }

// NativeTarget is the --target value that replays this source's entries
// through the system's own endpoint (cordum:URL or nexora:URL).
func (s *liveSource) NativeTarget() string { return s.format.Kind + ":" + s.base }

// OriginPrefix starts the Origin of every entry this source yields.
func (s *liveSource) OriginPrefix() string { return s.base + "/api/" }

func (s *liveSource) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	if s.format.Kind == entry.KindNexora {
		return s.nexoraEntries(ctx)
	}
	return func(yield func(entry.Entry, error) bool) {
		seen := map[string]bool{}
		cursor := ""
		// Cordum's cursor is a whole second and inclusive, so the entries
		// of a page's last second come again at the top of the next page
		// (cordum-io/cordum gateway handlers_dlq.go next_cursor,
		// core/infra/store/dlq_store.go ListByScore); they can only have
		// been on the page before, so that page's ids are all it takes to
		// yield each entry once.
		var prev map[string]bool
		for {
			u := s.pageURL(cursor)
			body, err := s.get(ctx, u)
			if err != nil {
				yield(entry.Entry{}, err)
				return
			}
			n := 0
			rr := records.Reader{Format: s.format, Name: u, R: bytes.NewReader(body), MaxLine: records.MaxRecord, Live: true}
			stopped := false
			cur := map[string]bool{}
			rr.Each(ctx, func(e entry.Entry, err error) bool {
				n++
				if err == nil && e.ID != "" {
					if prev[e.ID] {
						return true
					}
					cur[e.ID] = true
				}
				if !yield(e, err) {
					stopped = true
					return false
				}
				return true
			})
			if stopped {
				return
			}
			next, more, err := s.next(body, n)
			if err != nil {
				yield(entry.Entry{}, fmt.Errorf("read %s: %w", u, err))
				return
			}
			if !more {
				return
			}
			if seen[next] {
				// More than a page of entries dead-lettered in one second: the
				// gateway answers the same page again.
				yield(entry.Entry{}, fmt.Errorf("read %s: next_cursor %s repeats: more than %d entries were dead-lettered within one second, which the gateway cannot page past; read them with --source cordum-redis:redis://HOST:PORT/DB", u, next, cordumPageSize))
				return
			}
			seen[next] = true
			cursor = next
			prev = cur
		}
	}
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
		h := s.header.Clone()
		h.Set("Accept", "application/json")
		// Never redirected: a 3xx is an answer like any other non-200.
		a, err := s.client.Get(ctx, u, h, maxPage)
		switch {
		case errors.Is(err, httpout.ErrTooLarge):
			return backoff.Permanent(fmt.Errorf("page larger than %d bytes", maxPage))
		case err != nil:
			return err
		case a.Status == http.StatusUnauthorized || a.Status == http.StatusForbidden:
			return backoff.Permanent(fmt.Errorf("HTTP %d: %w: check the credentials in the environment (%s)",
				a.Status, errAuth, s.credentialNames()))
		case a.Status >= 500:
			return fmt.Errorf("HTTP %d%s", a.Status, bodyExcerpt(a.Body))
		case a.Redirect():
			return backoff.Permanent(errors.New(a.Excerpt()))
		case a.Status != http.StatusOK:
			return backoff.Permanent(fmt.Errorf("HTTP %d%s", a.Status, bodyExcerpt(a.Body)))
		}
		body = a.Body
		return nil
	}
	notify := func(err error, wait time.Duration) {
		if s.onRetry != nil {
			s.onRetry(fmt.Sprintf("%s source: GET %s: %s; retrying in %s (for up to a minute)",
				s.format.Kind, u, s.redact(err.Error()), wait.Round(time.Millisecond)))
		}
	}
	if err := backoff.RetryNotify(op, backoff.WithContext(s.retry(), ctx), notify); err != nil {
		return nil, fmt.Errorf("read %s source: GET %s: %s", s.format.Kind, u, s.redact(err.Error()))
	}
	return body, nil
}

// bodyExcerpt is the start of an error answer, which says why (Nexora:
// {"error": "Persistence disabled"}, {"error": "Invalid state ..."};
// Cordum: {"error": "failed to list dlq entries"}), on one line.
func bodyExcerpt(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	if t := strings.Join(strings.Fields(string(b)), " "); t != "" {
		return ": " + t
	}
	return ""
}

func (s *liveSource) credentialNames() string {
	if s.format.Kind == entry.KindCordum {
		return "CORDUM_API_KEY, CORDUM_TENANT_ID"
	}
	return "NEXORA_TOKEN"
}

func (s *liveSource) redact(msg string) string { return s.client.Redact(msg) }

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
	if s.format.Kind == entry.KindNexora {
		method, u = http.MethodPost, s.base+"/api/dead-letters/"+url.PathEscape(e.ID)+"/resolve"
		body, _ = json.Marshal(map[string]string{"reason": reason})
	}
	h := s.header.Clone()
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	a, res := s.client.Send(ctx, method, u, h, body, 0)
	if res != nil {
		return fmt.Errorf("write back %s: %s %s: %s", e.ID, method, u, res.Detail)
	}
	switch {
	case a.Status >= 200 && a.Status < 300,
		a.Status == http.StatusNotFound, a.Status == http.StatusConflict:
		return nil
	}
	return fmt.Errorf("write back %s: %s %s: %s", e.ID, method, u, s.redact(a.Excerpt()))
}

var _ Resolver = (*liveSource)(nil)
