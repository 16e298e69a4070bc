package source

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync"

	"github.com/replayctl/replayctl/internal/entry"
)

// CordumTenantLabel names the label holding the Cordum tenant an entry was
// read for, when a run reads several (CORDUM_TENANT_ID=acme,beta): its
// replay, probe and delete then carry that tenant (X-Tenant-ID), as the
// gateway requires (finmaster1/cordum auth/basic.go:488-496 at e00450ed,
// "tenant required"; handlers_dlq.go checks requireTenantAccess).
const CordumTenantLabel = "cordum_tenant"

// CordumTenants parses CORDUM_TENANT_ID: one tenant or a comma list,
// "default" when unset (as Cordum's gateway assumes).
func CordumTenants(v string) []string {
	var out []string
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" && !containsString(out, t) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return []string{"default"}
	}
	return out
}

func containsString(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// cordumNotes collects what a live Cordum read could not see.
type cordumNotes struct {
	mu    sync.Mutex
	lines []string
}

func (n *cordumNotes) reset() { n.mu.Lock(); n.lines = nil; n.mu.Unlock() }

func (n *cordumNotes) add(s string) { n.mu.Lock(); n.lines = append(n.lines, s); n.mu.Unlock() }

// Notes says what the last read could not attribute to a tenant.
func (s *liveSource) Notes() []string {
	if s.notes == nil {
		return nil
	}
	s.notes.mu.Lock()
	defer s.notes.mu.Unlock()
	return append([]string(nil), s.notes.lines...)
}

// cordumEntries reads Cordum's DLQ for every tenant configured, each
// entry once. The gateway's page endpoint takes `limit` ids by score,
// then drops other tenants' entries and those whose job metadata expired
// (7 days, job_store.go:131), and sends next_cursor only when the page it
// kept is still full (finmaster1/cordum gateway/handlers_dlq.go:64-88 at
// e00450ed; read at 03790ac7 handleListDLQPage). Stopping at the first
// page without a cursor read 250 of a tenant's 350 entries, exit 0. A
// short page is now followed on from its last entry's created_at until a
// page brings nothing new; what the gateway hid is reported (Notes).
func (s *liveSource) cordumEntries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		if s.notes == nil {
			s.notes = &cordumNotes{}
		}
		s.notes.reset()
		tenants := s.tenants
		if len(tenants) == 0 {
			tenants = []string{s.header.Get("X-Tenant-ID")}
		}
		yielded := map[string]bool{}
		for _, tenant := range tenants {
			ts := *s
			ts.header = s.header.Clone()
			ts.header.Set("X-Tenant-ID", tenant)
			label := ""
			if len(tenants) > 1 {
				label = tenant
			}
			if !ts.cordumTenantEntries(ctx, label, yielded, yield) {
				return
			}
		}
	}
}

// cordumPageItems is what the reader needs of a page besides the records.
type cordumPageItems struct {
	Items []struct {
		JobID     string    `json:"job_id"`
		CreatedAt timestamp `json:"created_at"`
	} `json:"items"`
}

// cordumTenantEntries reads the DLQ as one tenant; it returns false when
// the consumer stopped or an error was yielded.
func (s *liveSource) cordumTenantEntries(ctx context.Context, label string, yielded map[string]bool, yield func(entry.Entry, error) bool) bool {
	seen := map[string]bool{}
	cursor := ""
	short := 0
	followed := false // cursor is replayctl's own, after a short page
	tenant := s.header.Get("X-Tenant-ID")
	for {
		u := s.pageURL(cursor)
		body, err := s.get(ctx, u)
		if err != nil {
			yield(entry.Entry{}, err)
			return false
		}
		n, fresh := 0, 0
		rr := recordReader{format: s.format, name: u, r: bytes.NewReader(body), maxLine: maxRecord, live: true}
		stopped := false
		rr.each(ctx, func(e entry.Entry, err error) bool {
			n++
			if err == nil && e.ID != "" {
				// The cursor is an inclusive whole second, and a short page
				// is followed on from its last entry: entries come again.
				if yielded[e.ID] {
					return true
				}
				yielded[e.ID] = true
				if label != "" {
					if e.Labels == nil {
						e.Labels = map[string]string{}
					}
					e.Labels[CordumTenantLabel] = label
				}
			}
			fresh++
			if !yield(e, err) {
				stopped = true
				return false
			}
			return true
		})
		if stopped {
			return false
		}
		next, more, err := s.next(body, n)
		if err != nil {
			yield(entry.Entry{}, fmt.Errorf("read %s: %w", u, err))
			return false
		}
		wasFollowed := followed
		followed = false
		if !more && n > 0 && n < cordumPageSize && fresh > 0 {
			// A short page without a cursor: the gateway may have
			// dropped entries of other tenants or with expired job
			// metadata from it; more may follow. Go on from the page's
			// oldest entry, as the gateway's own cursor would.
			var p cordumPageItems
			if json.Unmarshal(body, &p) == nil && len(p.Items) > 0 {
				if last := p.Items[len(p.Items)-1].CreatedAt.Time; !last.IsZero() {
					next, more, followed = strconv.FormatInt(last.UnixMicro()-1, 10), true, true
					short++
				}
			}
		}
		if !more {
			if short > 1 {
				s.notes.add(fmt.Sprintf("%s (tenant %s): %d page(s) came back short of %d entries: Cordum's gateway drops other tenants' entries and entries whose job metadata expired (7 days) from each page; the read went on past them, but entries of tenants not in CORDUM_TENANT_ID, or whose metadata expired, cannot be attributed to a tenant through the gateway and were not read: --source cordum-redis:redis://HOST:PORT/DB reads them all",
					s.spec, tenant, short-1, cordumPageSize))
			}
			return true
		}
		if seen[next] {
			if fresh == 0 && wasFollowed {
				return true // a followed-on short page brought nothing new
			}
			yield(entry.Entry{}, fmt.Errorf("read %s: next_cursor %s repeats: more than %d entries were dead-lettered within one second, which the gateway cannot page past; read them with --source cordum-redis:redis://HOST:PORT/DB", u, next, cordumPageSize))
			return false
		}
		seen[next] = true
		cursor = next
	}
}
