package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// TestConsolePagesReadTheIndexesNotTheStore: the overview, the entries
// list, an entry page and the pending approvals queue come from the
// store's counters, series, cursor pages, per-entry audit index and open
// approvals index (issue 18 on issue 16's indexes): a page that still
// walks every entry, the audit chain or every approval request fails.
func TestConsolePagesReadTheIndexesNotTheStore(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("p1", "schema_invalid", ""),
		line("p2", "schema_invalid", `,"topic":"orders.eu"`), line("h1", "timeout", `,"labels":{"risk":"high"}`)})
	b.reconcile("operator")
	b.srv.cfg.Store = noScanStore{b.store, t}
	ui := newBrowser(t, b.http.URL)
	ui.login(b.tokens["viewer"], "/")
	for _, c := range []struct{ path, want string }{
		// 3 open: p1, p2 quarantined, h1 awaiting approval; e1 replayed.
		{"/", `id="open-count">3<`},
		{"/", "/entries?state=open&amp;sort=oldest"},
		{"/", "platform-oncall"},
		{"/entries?state=quarantined", `id="total-n">2<`},
		{"/entries?topic=orders.*", `id="total-n">1<`},
		{"/entries?q=p2", `jsonl:p2`},
		{"/entries/jsonl:h1", "approval requested"},
		{"/approvals?state=pending", "jsonl:h1"},
	} {
		code, _, page := ui.get(c.path)
		if code != 200 || !strings.Contains(page, c.want) {
			t.Fatalf("%s: %d, want %q in\n%s", c.path, code, c.want, page)
		}
	}
}

// countingReader counts the audit records a read visits.
type countingReader struct {
	*bolt.Bolt
	visited int
}

func (c *countingReader) AuditRange(ctx context.Context, from uint64, fn func(uint64, audit.Sealed, error) error) error {
	return c.Bolt.AuditRange(ctx, from, func(k uint64, s audit.Sealed, err error) error {
		c.visited++
		return fn(k, s, err)
	})
}

// TestAuditPageReadsOnlyItsPage: the unfiltered audit page reads its own
// seqs back from the head, not the chain from record 1.
func TestAuditPageReadsOnlyItsPage(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("p1", "schema_invalid", ""), line("p2", "schema_invalid", ""),
		line("p3", "schema_invalid", ""), line("p4", "schema_invalid", "")})
	b.reconcile("operator")
	ctx := context.Background()
	head, _, err := b.store.AuditHead(ctx)
	if err != nil || head < 6 {
		t.Fatalf("setup: head %d %v", head, err)
	}
	full, total, err := auditPage(ctx, b.store, auditQuery{Query: audit.Query{Kind: ""}, Page: 1, Size: int(head)})
	if err != nil || total != int(head) {
		t.Fatalf("whole chain: %d of %d, %v", total, head, err)
	}
	cr := &countingReader{Bolt: b.store}
	for page := 1; page <= 3; page++ {
		cr.visited = 0
		recs, total, err := auditPage(ctx, cr, auditQuery{Page: page, Size: 2})
		if err != nil || total != int(head) || len(recs) != 2 {
			t.Fatalf("page %d: %d records of %d, %v", page, len(recs), total, err)
		}
		if cr.visited > 3 {
			t.Fatalf("page %d visited %d records, want its 2 (and one past)", page, cr.visited)
		}
		for i, r := range recs {
			if want := full[(page-1)*2+i]; r.Seq != want.Seq || r.Kind != want.Kind {
				t.Fatalf("page %d item %d: %+v, want %+v", page, i, r, want)
			}
		}
	}
}

// TestAuditPageAndAPIShareOneIncrementalVerifier: what GET
// /api/audit/verify?incremental=1 verified, the audit page does not walk
// again, and the other way round (one audit.Incremental per server).
func TestAuditPageAndAPIShareOneIncrementalVerifier(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("p1", "schema_invalid", "")})
	b.reconcile("operator")
	if code, body := b.do("GET", "/api/audit/verify?incremental=1", "viewer", ""); code != 200 || !strings.Contains(body, `"verified_from":1`) {
		t.Fatalf("api: %d %s", code, body)
	}
	ui := newBrowser(t, b.http.URL)
	ui.login(b.tokens["viewer"], "/")
	if _, _, page := ui.get("/audit"); !strings.Contains(page, "; 0 new record(s) verified on this load") {
		t.Fatalf("the page walked what the API verified:\n%s", page)
	}
	if code, body := b.do("POST", "/api/dead-letters/jsonl:p1/resolve", "operator", `{"reason":"handled by hand"}`); code != 200 {
		t.Fatalf("resolve: %d %s", code, body)
	}
	if _, _, page := ui.get("/audit"); !strings.Contains(page, "; 1 new record(s) verified on this load") {
		t.Fatalf("the page did not verify the one new record:\n%s", page)
	}
	head, _, _ := b.store.AuditHead(context.Background())
	if code, body := b.do("GET", "/api/audit/verify?incremental=1", "viewer", ""); code != 200 || !strings.Contains(body, fmt.Sprintf(`"verified_from":%d`, head+1)) {
		t.Fatalf("api after the page: %d %s, want verified_from %d", code, body, head+1)
	}
}
