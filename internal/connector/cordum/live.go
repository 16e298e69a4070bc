package cordum

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

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/pages"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// PageSize is how many entries one Cordum request asks for: the
// gateway's ceiling (cordum-io/cordum core/controlplane/gateway/helpers.go
// maxListLimit = 500, applied by clampListLimit in handlers_dlq.go). The larger the page, the more entries failing
// within one second its whole-second cursor can page past.
const PageSize = 500

// Live reads a running Cordum's DLQ through its gateway. CORDUM_API_KEY
// and CORDUM_TENANT_ID come from the environment only and never appear
// in errors.
type Live struct {
	*pages.Reader
	target *Target // Cordum's own retry and its compensating read
	// tenants are the tenants read (CORDUM_TENANT_ID, a comma list);
	// notes what the last read could not see.
	tenants []string
	notes   notes
}

// NewLive is a live source for the gateway at base, with the credentials
// read through getenv (os.Getenv).
func NewLive(spec, base string, getenv func(string) string) (*Live, error) {
	r, err := pages.NewReader(spec, Kind, base)
	if err != nil {
		return nil, err
	}
	key, tenants := getenv("CORDUM_API_KEY"), Tenants(getenv("CORDUM_TENANT_ID"))
	tenant := tenants[0]
	r.SetCredential("X-API-Key", key)
	r.Header.Set("X-Tenant-ID", tenant)
	r.CredentialNames = "CORDUM_API_KEY, CORDUM_TENANT_ID"
	t, err := NewTarget(r.Base, 0, key, tenant)
	if err != nil {
		return nil, err
	}
	return &Live{Reader: r, target: t, tenants: tenants}, nil
}

// Replay asks Cordum to retry the job (Target.Dispatch).
func (s *Live) Replay(ctx context.Context, r connector.Request) connector.Result {
	return s.target.Dispatch(ctx, r)
}

// ProbeEntry is Cordum's compensating read (Target.ProbeEntry).
func (s *Live) ProbeEntry(ctx context.Context, e *entry.Entry) (connector.ProbeResult, string) {
	return s.target.ProbeEntry(ctx, e)
}

// Ref names the entry by its job id and links to the job on the gateway
// (GET /api/v1/jobs/{id}; the DLQ has no GET for one entry).
func (s *Live) Ref(e *entry.Entry) connector.Link {
	return connector.Link{Name: e.ID, URL: s.Base + "/api/v1/jobs/" + url.PathEscape(e.ID)}
}

// Codes lists the reason codes and job statuses Cordum writes.
func (s *Live) Codes() []connector.Code { return Codes() }

var _ connector.Connector = (*Live)(nil)

// NativeTarget is the --target value that replays this source's entries
// through Cordum's own retry.
func (s *Live) NativeTarget() string { return Kind + ":" + s.Base }

// Notes says what the last read could not attribute to a tenant.
func (s *Live) Notes() []string { return s.notes.get() }

// Entries reads the gateway's DLQ page by page (GET
// /api/v1/dlq/page?limit=&cursor=, following next_cursor;
// cordum-io/cordum core/controlplane/gateway handlers_dlq.go), as every
// tenant configured in turn, each entry once. With several tenants each
// entry carries the tenant it was read as (TenantLabel), so that its
// replay, probe and delete carry it too.
func (s *Live) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		s.notes.reset()
		tenants := s.tenants
		if len(tenants) == 0 {
			tenants = []string{s.Header.Get("X-Tenant-ID")}
		}
		// Cordum's cursor is a whole second and inclusive, so the entries
		// of a page's last second come again at the top of the next page
		// (cordum-io/cordum gateway handlers_dlq.go next_cursor,
		// core/infra/store/dlq_store.go ListByScore), and a page the
		// gateway filtered short is read on from its last entry
		// (walkPages): an entry yielded once is not yielded again.
		yielded := map[string]bool{}
		for _, tenant := range tenants {
			r := *s.Reader
			r.Header = s.Header.Clone()
			r.Header.Set("X-Tenant-ID", tenant)
			label := ""
			if len(tenants) > 1 {
				label = tenant
			}
			stopped := false
			short, err := walkPages(ctx, s.Base, r.Get, 0, func(u string, body []byte) (int, bool) {
				n := 0
				rr := records.Reader{Format: Format(), Name: u, R: bytes.NewReader(body), MaxLine: records.MaxRecord, Live: true}
				rr.Each(ctx, func(e entry.Entry, err error) bool {
					n++
					if err == nil && e.ID != "" {
						if yielded[e.ID] {
							return true
						}
						yielded[e.ID] = true
						if label != "" {
							if e.Labels == nil {
								e.Labels = map[string]string{}
							}
							e.Labels[TenantLabel] = label
						}
					}
					if !yield(e, err) {
						stopped = true
						return false
					}
					return true
				})
				return n, stopped
			})
			if errors.Is(err, errNoCursor) || errors.Is(err, errCursorRepeats) {
				err = fmt.Errorf("%w%s", err, redisHint)
			}
			if err != nil {
				yield(entry.Entry{}, err)
				return
			}
			if stopped {
				return
			}
			if short > 1 {
				// The read ends with one short page, the last; more were
				// filtered short by the gateway.
				s.notes.add(fmt.Sprintf("%s (tenant %s): %d page(s) came back short of %d entries: Cordum's gateway drops other tenants' entries and entries whose job metadata expired (7 days) from each page; the read went on past them, but entries of tenants not in CORDUM_TENANT_ID, or whose metadata expired, cannot be attributed to a tenant through the gateway and were not read: --source cordum-redis:redis://HOST:PORT/DB reads them all",
					s.Spec, tenant, short-1, PageSize))
			}
		}
	}
}

// Errors of the page loop that are not the gateway's answer but where it
// cannot take a reader further (cordum-io/cordum handlers_dlq.go).
var (
	// errNoCursor: a full page and no next_cursor. The gateway sends none
	// when the page's last entry has no created_at, and such entries score
	// lowest in dlq:index: more may follow.
	errNoCursor = errors.New("no next_cursor after this full page (its last entry has no created_at): the gateway cannot page past it and more entries may follow")
	// errCursorRepeats: more than a page of entries dead-lettered in one
	// second; the gateway answers the same page again.
	errCursorRepeats = fmt.Errorf("more than %d entries were dead-lettered within one second, which the gateway cannot page past", PageSize)
	// errTooLong: the loop's page bound was reached.
	errTooLong = errors.New("DLQ too long to scan")
)

// redisHint is what reads past what the gateway cannot page past.
const redisHint = "; read them with --source cordum-redis:redis://HOST:PORT/DB"

// walkPages is the one page loop over the gateway's DLQ (GET
// /api/v1/dlq/page?limit=&cursor=, following next_cursor), used by the
// live source and by the compensating read. get fetches one page; page
// handles it and says how many records it held and whether to stop.
// maxPages bounds the walk (0: no bound). It ends nil at the end of the
// DLQ, or with the error of get, of a page that is not JSON, or one of
// errNoCursor, errCursorRepeats, errTooLong (wrapped, naming the page).
//
// The gateway takes `limit` ids by score, then drops other tenants'
// entries and those whose job metadata expired (7 days, job_store.go:131),
// and sends next_cursor only when the page it kept is still full
// (finmaster1/cordum gateway/handlers_dlq.go:64-88 at e00450ed; 03790ac7
// handleListDLQPage). So a short page without a cursor is not the end of
// the DLQ: stopping there read 250 of a tenant's 350 entries, and a probe
// answered "gone: committed" for a job further on. A short page that
// brought a job not seen before is read on from its last entry's
// created_at (in microseconds minus one, as the gateway's own cursor);
// the walk ends at a short page that brings nothing new. short counts
// the short pages read on from, the last page included.
func walkPages(ctx context.Context, base string, get func(context.Context, string) ([]byte, error),
	maxPages int, page func(u string, body []byte) (n int, stop bool)) (short int, err error) {
	seen := map[string]bool{} // cursors asked for
	ids := map[string]bool{}  // jobs listed on this walk
	cursor := ""
	followed := false // cursor is replayctl's own, after a short page
	for i := 0; maxPages == 0 || i < maxPages; i++ {
		u := pageURL(base, cursor)
		body, err := get(ctx, u)
		if err != nil {
			return short, err
		}
		n, stop := page(u, body)
		if stop {
			return short, nil
		}
		next, more, err := nextCursor(body, n)
		if err != nil {
			return short, fmt.Errorf("read %s: %w", u, err)
		}
		fresh, last := pageJobs(body, ids)
		wasFollowed := followed
		followed = false
		if !more && n > 0 && n < PageSize && fresh && !last.IsZero() {
			next, more, followed = strconv.FormatInt(last.UnixMicro()-1, 10), true, true
			short++
		}
		if !more {
			return short, nil
		}
		if seen[next] {
			if !fresh && wasFollowed {
				return short, nil // a short page read on from brought nothing new
			}
			return short, fmt.Errorf("read %s: next_cursor %s repeats: %w", u, next, errCursorRepeats)
		}
		seen[next] = true
		cursor = next
	}
	return short, errTooLong
}

// pageJobs notes the jobs a page lists in ids: fresh when one was not
// there before; last is the created_at of the page's last entry.
func pageJobs(body []byte, ids map[string]bool) (fresh bool, last time.Time) {
	var p struct {
		Items []struct {
			JobID     string            `json:"job_id"`
			CreatedAt records.Timestamp `json:"created_at"`
		} `json:"items"`
	}
	if json.Unmarshal(body, &p) != nil || len(p.Items) == 0 {
		return false, time.Time{}
	}
	for _, it := range p.Items {
		if it.JobID != "" && !ids[it.JobID] {
			ids[it.JobID], fresh = true, true
		}
	}
	return fresh, p.Items[len(p.Items)-1].CreatedAt.Time
}

// pageURL is the URL of Cordum's page at cursor.
func pageURL(base, cursor string) string {
	q := url.Values{"limit": {strconv.Itoa(PageSize)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return base + "/api/v1/dlq/page?" + q.Encode()
}

// nextCursor says whether another page follows, and its cursor.
func nextCursor(body []byte, n int) (string, bool, error) {
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
		if n >= PageSize {
			// A full page and no cursor: the gateway sends none when the
			// page's last entry has no created_at (cordum-io/cordum
			// core/controlplane/gateway/handlers_dlq.go:82-89), and such
			// entries score lowest in dlq:index: more may follow.
			return "", false, fmt.Errorf("%d entries: %w", n, errNoCursor)
		}
		return "", false, nil
	}
	return c, true, nil
}

// Settle takes the entry out of Cordum's DLQ the way Cordum itself does,
// whatever replayctl did with it (a replay elsewhere or a person's
// resolve): the gateway's DELETE /api/v1/dlq/{job_id} (204;
// handlers_dlq.go handleDeleteDLQ), which takes no reason. It is sent as
// the entry's own tenant (TenantLabel). An entry already gone is not an
// error.
func (s *Live) Settle(ctx context.Context, e *entry.Entry, _ connector.Settlement) error {
	r := s.Reader
	if e.Labels[TenantLabel] != "" {
		c := *s.Reader
		c.Header = withTenant(s.Header.Clone(), e)
		r = &c
	}
	return r.SettleRequest(ctx, e.ID, http.MethodDelete, s.Base+"/api/v1/dlq/"+url.PathEscape(e.ID), nil)
}

var _ connector.Settler = (*Live)(nil)
