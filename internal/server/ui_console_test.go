package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// chainReader is an audit.Chain over records held in memory, written by
// one chaining writer (no unsealed tail, no base, no snapshots, no
// ledger): the test can append to, or cut, the chain between page loads.
type chainReader struct {
	recs []audit.Sealed
	mac  string
}

var _ audit.Chain = (*chainReader)(nil)

func (c *chainReader) add(t *testing.T, n int) {
	t.Helper()
	for range n {
		prev := audit.Genesis
		if len(c.recs) > 0 {
			prev = c.recs[len(c.recs)-1].Hash
		}
		s, err := audit.Seal(&audit.Record{Seq: uint64(len(c.recs) + 1), Kind: audit.KindDecision, Actor: "t"}, prev)
		if err != nil {
			t.Fatal(err)
		}
		c.recs = append(c.recs, s)
	}
}

func (c *chainReader) AuditRange(_ context.Context, from uint64, fn func(uint64, audit.Sealed, error) error) error {
	for _, s := range c.recs {
		if s.Seq >= from {
			if err := fn(s.Seq, s, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *chainReader) AuditHead(context.Context) (uint64, string, error) {
	if len(c.recs) == 0 {
		return 0, audit.Genesis, nil
	}
	last := c.recs[len(c.recs)-1]
	return last.Seq, last.Hash, nil
}

func (c *chainReader) AuditHeadMAC(context.Context) (string, error) { return c.mac, nil }

func (c *chainReader) AuditSignedHead(ctx context.Context) (uint64, string, string, error) {
	seq, head, err := c.AuditHead(ctx)
	return seq, head, c.mac, err
}

func (c *chainReader) AuditBase(context.Context) (*audit.Checkpoint, error)              { return nil, nil }
func (c *chainReader) AuditUnsealed(context.Context) (int, error)                        { return 0, nil }
func (c *chainReader) AuditTailForged(context.Context, []byte) (uint64, error)           { return 0, nil }
func (c *chainReader) CheckSnapshot(context.Context, string) error                       { return nil }
func (c *chainReader) LedgerStates(context.Context, func(key, state string) error) error { return nil }

// TestAuditPageVerifiesIncrementally: issue #18 "the audit page
// re-verifies the whole chain on every load": each load verifies only the
// records added since; a head behind what was verified is a rollback; a
// signed head is checked with the key. The page and GET
// /api/audit/verify?incremental=1 share one audit.Incremental.
func TestAuditPageVerifiesIncrementally(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	key := []byte("k")
	c := &chainReader{}
	c.add(t, 5)
	seq, head, _ := c.AuditHead(ctx)
	c.mac = audit.HeadMAC(key, seq, head)
	var iv audit.Incremental
	hv, err := verifyHead(ctx, &iv, c, key, now)
	if err != nil || hv.Break != nil || hv.Records != 5 || hv.Checked != 5 || !hv.Signed {
		t.Fatalf("first load: %+v %v", hv, err)
	}
	hv, _ = verifyHead(ctx, &iv, c, key, now)
	if hv.Checked != 0 || hv.Records != 5 || !hv.Signed {
		t.Fatalf("second load re-verified: %+v", hv)
	}
	c.add(t, 2)
	seq, head, _ = c.AuditHead(ctx)
	c.mac = audit.HeadMAC(key, seq, head)
	if hv, _ = verifyHead(ctx, &iv, c, key, now); hv.Checked != 2 || hv.Records != 7 || hv.Break != nil {
		t.Fatalf("after two more: %+v", hv)
	}
	// A head signed with another key is reported.
	c.mac = audit.HeadMAC([]byte("other"), seq, head)
	if hv, _ = verifyHead(ctx, &audit.Incremental{}, c, key, now); hv.Break == nil || hv.Signed {
		t.Fatalf("wrong head signature not reported: %+v", hv)
	}
	// Rolled back to 4 records and consistently re-signed: behind what was
	// verified, so a rollback, though the shorter chain is intact.
	c.recs = c.recs[:4]
	seq, head, _ = c.AuditHead(ctx)
	c.mac = audit.HeadMAC(key, seq, head)
	hv, _ = verifyHead(ctx, &iv, c, key, now)
	if hv.Break == nil || !strings.Contains(hv.Break.Reason, "rolled back") {
		t.Fatalf("rollback not reported: %+v", hv)
	}
	// It stays reported while the head is behind.
	if hv, _ = verifyHead(ctx, &iv, c, key, now); hv.Break == nil {
		t.Fatalf("the rollback was forgotten")
	}
}

// TestConsoleCoreActionsWithoutJavaScript: the entries page's bulk action
// (preview, confirm), an entry page action and a run's cancel form are
// plain forms: a client without JavaScript does them all.
func TestConsoleCoreActionsWithoutJavaScript(t *testing.T) {
	b := newAPIBundle(t, []string{line("q1", "schema_invalid", ""), line("q2", "schema_invalid", ""), line("q3", "schema_invalid", "")})
	b.reconcile("operator")
	ui := newBrowser(t, b.http.URL)
	ui.login(b.tokens["operator"], "/")
	code, _, page := ui.get("/entries?state=quarantined")
	if code != 200 || !strings.Contains(page, `id="total-n">3<`) {
		t.Fatalf("entries: %d\n%s", code, page)
	}
	// Preview (GET) then confirm (POST with the session's CSRF token).
	code, _, page = ui.get("/entries/act?" + url.Values{"op": {"resolve"}, "scope": {"selected"}, "id": {"jsonl:q1", "jsonl:q2"}}.Encode())
	if code != 200 || !strings.Contains(page, `id="would">2<`) {
		t.Fatalf("preview: %d\n%s", code, page)
	}
	csrf := csrfRe.FindStringSubmatch(page)[1]
	form := url.Values{"csrf": {csrf}, "op": {"resolve"}, "scope": {"selected"}, "id": {"jsonl:q1", "jsonl:q2"}}
	// Without a reason it is refused, nothing changes.
	if code, loc, _ := ui.post("/entries/act", form); code != http.StatusSeeOther || !strings.Contains(loc, "reason+is+required") {
		t.Fatalf("resolve without a reason: %d %s", code, loc)
	}
	form.Set("reason", "duplicates of q3")
	code, loc, _ := ui.post("/entries/act", form)
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/runs/run-") {
		t.Fatalf("confirm: %d %s", code, loc)
	}
	b.srv.Wait()
	if _, _, page = ui.get(loc); !strings.Contains(page, `id="run-state">succeeded<`) {
		t.Fatalf("run page:\n%s", page)
	}
	for ref, want := range map[string]string{"jsonl:q1": store.StatusResolved, "jsonl:q2": store.StatusResolved, "jsonl:q3": store.StatusQuarantined} {
		var er *store.EntryRecord
		_ = b.store.View(context.Background(), func(tx store.Tx) error { er, _ = tx.Entry(ref); return nil })
		if er == nil || er.Status != want {
			t.Fatalf("%s: %+v, want %s", ref, er, want)
		}
	}
	// A forged confirmation (no CSRF token) is refused.
	form.Del("csrf")
	if code, _, _ := ui.post("/entries/act", form); code != http.StatusForbidden {
		t.Fatalf("confirm without CSRF: %d", code)
	}
	// The entry page's Release form.
	code, loc, _ = ui.post("/entries/jsonl:q3/release", url.Values{"csrf": {csrf}, "reason": {"schema fixed"}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "released+by+operator") {
		t.Fatalf("release: %d %s", code, loc)
	}
	// Cancelling a run that is not running says so.
	code, loc, _ = ui.post("/runs/no-such-run/cancel", url.Values{"csrf": {csrf}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "not+cancelled") {
		t.Fatalf("cancel of an unknown run: %d %s", code, loc)
	}
	// A viewer may not post actions.
	v := newBrowser(t, b.http.URL)
	v.login(b.tokens["viewer"], "/")
	_, _, vp := v.get("/entries")
	vcsrf := csrfRe.FindStringSubmatch(vp)[1]
	if code, _, _ := v.post("/entries/jsonl:q3/resolve", url.Values{"csrf": {vcsrf}, "reason": {"x"}}); code != http.StatusForbidden {
		t.Fatalf("viewer resolving: %d", code)
	}
}

// TestApprovalChangedSince: what an approver is told changed since the
// entry's previous request.
func TestApprovalChangedSince(t *testing.T) {
	prev := &store.Approval{ApproverGroup: "oncall", Evidence: "e1"}
	prev.Decision.PayloadHash, prev.Decision.PolicySnapshot, prev.Decision.Reasons = "sha256:aaaaaaaaaaaaaaaaaaaaaaaa", "sha256:p1", []string{"risk: high"}
	prev.Decision.Ledger.Replays = 1
	cur := *prev
	cur.Decision.Reasons = []string{"risk: high"}
	cur.Evidence = "e2"
	if got := changedSince(prev, &cur); len(got) != 1 || got[0] != "evidence hash only" {
		t.Fatalf("same decision, new evidence: %v", got)
	}
	cur.Decision.PayloadHash, cur.Decision.PolicySnapshot, cur.Decision.Ledger.Replays = "sha256:bbbbbbbbbbbbbbbbbbbbbbbb", "sha256:p2", 2
	cur.Decision.Reasons = []string{"risk: high", "max_replays near"}
	got := strings.Join(changedSince(prev, &cur), "|")
	for _, want := range []string{"payload: sha256:aaaaaaaaaaaa… → sha256:bbbbbbbbbbbb…", "policy snapshot: sha256:p1 → sha256:p2", "replays so far: 1 → 2", "reasons changed"} {
		if !strings.Contains(got, want) {
			t.Fatalf("changes %q lack %q", got, want)
		}
	}
}

// TestLoginKeepsTheFilteredPage: a link to a filtered list opened without
// a session comes back to that list, filters included, after login.
func TestLoginKeepsTheFilteredPage(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	ui := newBrowser(t, b.http.URL)
	code, loc, _ := ui.get("/entries?state=open&topic=tool.*.send")
	if code != http.StatusSeeOther {
		t.Fatalf("anonymous: %d", code)
	}
	next, _ := url.Parse(loc)
	want := "/entries?state=open&topic=tool.*.send"
	if got := next.Query().Get("next"); got != want {
		t.Fatalf("login next = %q, want %q", got, want)
	}
	if code, loc, _ := ui.login(b.tokens["viewer"], want); code != http.StatusSeeOther || loc != want {
		t.Fatalf("after login: %d %s, want %s", code, loc, want)
	}
}

// TestEntryPageSortsAcrossPages: sorted by last failure, pages continue
// one another whatever the store order, and the total counts every match.
func TestEntryPageSortsAcrossPages(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(t.TempDir()+"/s.db", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	// Refs in one order, failure times in another: e00 failed last.
	if err := st.Update(ctx, func(tx store.Tx) error {
		for i := range 25 {
			er := &store.EntryRecord{Status: store.StatusPending, FirstSeen: t0}
			er.Entry.ID, er.Entry.Source, er.Entry.IdempotencyKey = fmt.Sprintf("e%02d", i), "jsonl", fmt.Sprintf("k%02d", i)
			er.Entry.LastFailure = t0.Add(time.Duration(25-i) * time.Minute)
			if err := tx.PutEntry(er); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f := replay.BulkFilter{All: true}
	if err := f.Compile(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for page := 1; page <= 3; page++ {
		p, err := entryPage(ctx, st, &f, t0, "oldest", page, 10)
		if err != nil || p.Total != 25 {
			t.Fatalf("page %d: total %d, %v", page, p.Total, err)
		}
		for _, it := range p.Items {
			got = append(got, it.Entry.ID)
		}
	}
	if len(got) != 25 || got[0] != "e24" || got[9] != "e15" || got[10] != "e14" || got[24] != "e00" {
		t.Fatalf("oldest first over 3 pages: %v", got)
	}
	p, _ := entryPage(ctx, st, &f, t0, "newest", 1, 3)
	if ids := []string{p.Items[0].Entry.ID, p.Items[1].Entry.ID, p.Items[2].Entry.ID}; ids[0] != "e00" || ids[2] != "e02" {
		t.Fatalf("newest first: %v", ids)
	}
	if p, _ := entryPage(ctx, st, &f, t0, "oldest", 4, 10); len(p.Items) != 0 {
		t.Fatalf("page past the end: %d items", len(p.Items))
	}
}
