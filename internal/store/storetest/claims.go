package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// claims: Features says the truth about work sharing; the scheduler lock
// is one holder's at a time across the store's processes (bbolt: the file
// lock already is); on a shared store an entry is leased to one worker at
// a time, each claim with a newer fencing token, and a write under a
// claim no longer current is refused (store.ErrStaleFence).
func claims(t *testing.T, s store.Backend) {
	ctx := context.Background()
	sh, shared := store.Shared(s), s.Features().Shared
	if _, err := sh.Now(ctx); shared == errors.Is(err, store.ErrNotImplemented) {
		t.Fatalf("Features().Shared is %v, but the store's clock answers %v", shared, err)
	}
	release, ok, err := s.TryRunLock(ctx)
	if err != nil || !ok {
		t.Fatalf("scheduler lock: %v %v", ok, err)
	}
	if shared {
		if r2, ok2, err := s.TryRunLock(ctx); err != nil || ok2 {
			if ok2 {
				r2()
			}
			t.Fatalf("a second holder of the scheduler lock: %v %v", ok2, err)
		}
	}
	release()
	if r3, ok3, err := s.TryRunLock(ctx); err != nil || !ok3 {
		t.Fatalf("scheduler lock after its release: %v %v", ok3, err)
	} else {
		r3()
	}
	if !shared {
		notShared(t, s)
		return
	}
	if errs := s.UpdateGroup(ctx, []func(store.Tx) error{func(store.Tx) error { return nil }}); !errors.Is(errs[0], store.ErrNotImplemented) {
		t.Fatalf("a shared store's UpdateGroup: %v, want ErrNotImplemented (the runner's commit queue checks each claim)", errs[0])
	}
	if end := s.BeginDispatch("ck0"); s.Dispatching("ck0") {
		t.Fatal("a shared store says a dispatch is in flight in this process: its leases decide")
	} else {
		end()
	}
	var recs []*store.EntryRecord
	for i := range 5 {
		recs = append(recs, &store.EntryRecord{Entry: entry.Entry{ID: fmt.Sprintf("c%d", i), Source: "jsonl", IdempotencyKey: fmt.Sprintf("ck%d", i)},
			Status: store.StatusPending, Class: triage.Transient})
	}
	if n, err := sh.Ingest(ctx, recs); err != nil || n != 5 {
		t.Fatalf("ingest: %d %v", n, err)
	}
	if n, err := sh.Ingest(ctx, recs[:2]); err != nil || n != 0 {
		t.Fatalf("ingest again: %d new %v", n, err)
	}
	now, err := sh.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, err := sh.Claim(ctx, "worker-a", now, 3, time.Minute)
	if err != nil || len(a) != 3 {
		t.Fatalf("claim 3: %d %v", len(a), err)
	}
	b, err := sh.Claim(ctx, "worker-b", now, 5, time.Minute)
	if err != nil || len(b) != 2 {
		t.Fatalf("claim the rest: %d %v", len(b), err)
	}
	seen := map[string]bool{}
	for _, c := range slices.Concat(a, b) {
		if seen[c.Entry.Entry.Ref()] {
			t.Fatalf("%s leased twice", c.Entry.Entry.Ref())
		}
		seen[c.Entry.Entry.Ref()] = true
	}
	ref := a[0].Entry.Entry.Ref()
	if _, ok, err := sh.ClaimRef(ctx, ref, "worker-b", time.Minute); err != nil || ok {
		t.Fatalf("claim of an entry another worker holds: %v %v", ok, err)
	}
	if err := sh.Release(ctx, ref, a[0].Token); err != nil {
		t.Fatal(err)
	}
	c, ok, err := sh.ClaimRef(ctx, ref, "worker-b", time.Minute)
	if err != nil || !ok || c.Token <= a[0].Token {
		t.Fatalf("claim after the release: %+v %v %v (the old token was %d)", c, ok, err, a[0].Token)
	}
	key := c.Entry.Entry.IdempotencyKey
	stale := store.WithFence(ctx, store.Fence{Ref: ref, Token: a[0].Token, Key: key})
	if err := s.Update(stale, func(tx store.Tx) error {
		_, err := tx.Transition(idempotency.Transition{Key: key, To: idempotency.Decided, EntryRef: ref})
		return err
	}); !errors.Is(err, store.ErrStaleFence) {
		t.Fatalf("a write under the released claim: %v, want ErrStaleFence", err)
	}
	current := store.WithFence(ctx, store.Fence{Ref: ref, Token: c.Token, Key: key})
	if err := s.Update(current, func(tx store.Tx) error {
		_, err := tx.Transition(idempotency.Transition{Key: key, To: idempotency.Decided, EntryRef: ref})
		return err
	}); err != nil {
		t.Fatalf("a write under the current claim: %v", err)
	}
}

// pruneFixture stores closed entries last active before cut (with a
// decision and an outcome record each, every fifth with an approval),
// then open ones, then closed ones after the cut, in that chain order.
func pruneFixture(t *testing.T, s store.Backend, cut time.Time) (old, open, recent []string) {
	t.Helper()
	add := func(n int, prefix, status string, at time.Time) (refs []string) {
		if err := s.Update(context.Background(), func(tx store.Tx) error {
			for i := range n {
				when := at.Add(time.Duration(i) * time.Minute)
				e := entry.Entry{ID: fmt.Sprintf("%s-%02d", prefix, i), Source: "jsonl", Topic: []string{"orders.eu", "payments"}[i%2],
					ReasonCode: "timeout", Message: fmt.Sprintf("%s timed out", prefix), IdempotencyKey: fmt.Sprintf("key-%s-%02d", prefix, i),
					Payload: []byte(`{"n":1}`), FirstFailure: when}
				ref := e.Ref()
				refs = append(refs, ref)
				if err := tx.PutEntry(&store.EntryRecord{Entry: e, Status: status, Class: triage.Transient, FirstSeen: when, LastSeen: when}); err != nil {
					return err
				}
				if _, err := tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, To: idempotency.Decided, EntryRef: ref}); err != nil {
					return err
				}
				if _, err := tx.Append(&audit.Record{Time: when, Actor: "test", Kind: audit.KindDecision, EntryRef: ref, Key: e.IdempotencyKey}); err != nil {
					return err
				}
				if _, err := tx.Append(&audit.Record{Time: when.Add(time.Second), Actor: "test", Kind: audit.KindOutcome, EntryRef: ref, Outcome: "succeeded"}); err != nil {
					return err
				}
				if i%5 == 0 {
					if err := tx.PutApproval(&store.Approval{ID: "apr-" + e.ID, EntryRef: ref, EntryID: e.ID, Key: e.IdempotencyKey,
						State: store.ApprovalPending, RequestedAt: when}); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return refs
	}
	old = add(12, "old", store.StatusReplayed, cut.Add(-10*24*time.Hour))
	open = add(3, "open", store.StatusQuarantined, cut.Add(-5*24*time.Hour))
	recent = add(3, "new", store.StatusResolved, cut.Add(24*time.Hour))
	return old, open, recent
}

// pruneArchives: a prune archives the closed entries before the cut with
// their ledger records and approvals and the chain's prefix up to the
// first record of an entry that stays, removes them (the indexes and
// counters with them: the views equal a scan afterwards), keeps the
// ledger, and leaves a chain that verifies from its base and, with the
// archive, end to end; it goes on verifying after the next append.
func pruneArchives(t *testing.T, s store.Backend) {
	ctx := context.Background()
	cut := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	key := []byte("storetest-prune-key")
	old, open, recent := pruneFixture(t, s, cut)
	before, err := s.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	archive := filepath.Join(dir, "prune.jsonl.gz")
	res, err := s.Prune(ctx, store.PruneOptions{Before: cut, Archive: archive, Key: key, Batch: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Entries != 12 || res.Audit != 24 || res.Approvals != 3 || res.Ledger != 12 || res.HeldBy != open[0] || res.HeldAt != 25 {
		t.Fatalf("prune result %+v", res)
	}
	if res.Base == nil || res.Base.Seq != 24 || res.Base.MAC != audit.BaseMAC(key, 24, res.Base.Head) {
		t.Fatalf("base %+v", res.Base)
	}
	if b, err := s.AuditBase(ctx); err != nil || b == nil || *b != *res.Base {
		t.Fatalf("AuditBase %+v %v, the prune said %+v", b, err, res.Base)
	}
	live := map[string]bool{}
	if err := s.Entries(ctx, func(r *store.EntryRecord) error { live[r.Entry.Ref()] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, ref := range old {
		if live[ref] {
			t.Errorf("%s was not pruned", ref)
		}
	}
	for _, ref := range slices.Concat(open, recent) {
		if !live[ref] {
			t.Errorf("%s (open, or closed after the cut) was removed", ref)
		}
	}
	// The ledger is kept: a key that succeeded is never sent again.
	if v, err := s.LedgerView(ctx, "key-old-00"); err != nil || v.State != string(idempotency.Decided) {
		t.Errorf("ledger of a pruned entry: %+v %v", v, err)
	}
	// The views follow: counters equal a scan (the audit counters keep
	// what was decided), an index no longer lists what left.
	checkCounters(t, s, before.Decisions, before.Denied)
	if p, err := s.Page(ctx, store.EntryFilter{}, "", 100); err != nil || len(p.Items) != 6 || p.Total != 6 {
		t.Errorf("page after the prune: %+v %v", p, err)
	}
	n := 0
	if err := s.ApprovalsByState(ctx, nil, func(*store.Approval) error { n++; return nil }); err != nil || n != 2 {
		t.Errorf("%d approvals by state after the prune (%v), want 2", n, err)
	}
	if refs, err := s.RefsByID(ctx, "old-00"); err != nil || len(refs) != 0 {
		t.Errorf("refs of a pruned id: %v %v", refs, err)
	}
	if seqs, err := s.AuditSeqs(ctx, store.AuditFilter{Actor: "test"}); err != nil || len(seqs) != 12 || seqs[0] != 25 {
		t.Errorf("audit seqs after the prune: %v %v", seqs, err)
	}
	if err := s.EntryAudit(ctx, old[0], "key-old-00", func(seq uint64, _ audit.Sealed, _ error) error {
		return fmt.Errorf("record %d of a pruned entry still read", seq)
	}); err != nil {
		t.Error(err)
	}
	// The live chain verifies from its base (taken on trust without the
	// key, and the result says so), and with the archive end to end.
	vr, err := audit.Verify(ctx, s, nil)
	if err != nil || !vr.OK() || vr.Pruned == nil || vr.Pruned.Seq != 24 {
		t.Fatalf("verify after the prune: %+v %v", vr, err)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if vr, err := audit.VerifyArchived(ctx, []io.Reader{f}, s, audit.VerifyOptions{}); err != nil || !vr.OK() {
		t.Fatalf("archive + live: %+v %v", vr, err)
	}
	// Nothing more to prune: no archive is written.
	again := filepath.Join(dir, "again.jsonl.gz")
	if res, err := s.Prune(ctx, store.PruneOptions{Before: cut, Archive: again, Key: key}); err != nil || res.Entries+res.Audit+res.Approvals != 0 {
		t.Fatalf("second prune: %+v %v", res, err)
	}
	if _, err := os.Stat(again); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an empty prune wrote %s", again)
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		_, err := tx.Append(&audit.Record{Time: cut, Actor: "test", Kind: audit.KindBulk})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if vr, err := audit.Verify(ctx, s, nil); err != nil || !vr.OK() {
		t.Fatalf("verify after the next append: %+v %v", vr, err)
	}
	if seq, _, err := s.AuditHead(ctx); err != nil || seq != 24+12+1 {
		t.Fatalf("head %d %v after the next append, want 37", seq, err)
	}
}

// notShared: a store one process holds answers every work-sharing
// operation with ErrNotImplemented (the runner never calls them there),
// and tracks the dispatches of its own process instead.
func notShared(t *testing.T, s store.Backend) {
	ctx := context.Background()
	_, claimErr := s.Claim(ctx, "suite", time.Time{}, 1, time.Minute)
	_, _, refErr := s.ClaimRef(ctx, "jsonl:x", "suite", time.Minute)
	_, renewErr := s.RenewLease(ctx, "jsonl:x", 1, time.Minute)
	var fenceErr, checkErr error
	if err := s.Update(ctx, func(tx store.Tx) error {
		fenceErr = tx.UnderFence(store.Fence{Ref: "jsonl:x", Token: 1}, func(store.Tx) error { return nil })
		_, checkErr = tx.CheckFences([]store.Fence{{Ref: "jsonl:x", Token: 1}})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{"Claim": claimErr, "ClaimRef": refErr, "RenewLease": renewErr,
		"FlushReleases": s.FlushReleases(ctx), "Release": s.Release(ctx, "jsonl:x", 1), "UnderFence": fenceErr, "CheckFences": checkErr} {
		if !errors.Is(err, store.ErrNotImplemented) {
			t.Errorf("%s on a store one process holds: %v, want ErrNotImplemented", name, err)
		}
	}
	end := s.BeginDispatch("k")
	if !s.Dispatching("k") {
		t.Error("a dispatch begun is not in flight")
	}
	end()
	if s.Dispatching("k") {
		t.Error("a dispatch ended is still in flight")
	}
}
