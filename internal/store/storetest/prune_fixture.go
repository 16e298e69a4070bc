package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
)

// The prune fixture both backends' prune and kill tests write and check.

var (
	PruneKey = []byte("prune-test-key")
	pruneT0  = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// PruneCut: closed entries last active before it leave.
	PruneCut = pruneT0.Add(10 * 24 * time.Hour)
)

// PruneFixture writes a store of closed entries failed before the cut
// (replayed or resolved, some with an approval), then open ones, then
// closed ones active after the cut, each with a decision and an outcome
// record, in that order in the chain.
type PruneFixture struct {
	ClosedOld, Open, ClosedNew []string
	Approvals                  []string
}

// FillPruneStore writes the prune fixture into st (either backend).
func FillPruneStore(t *testing.T, st store.Backend, closedOld, open, closedNew int) *PruneFixture {
	t.Helper()
	fx := &PruneFixture{}
	add := func(n int, prefix, status string, at time.Time, list *[]string) {
		err := st.Update(context.Background(), func(tx store.Tx) error {
			for i := range n {
				when := at.Add(time.Duration(i) * time.Minute)
				e := entry.Entry{ID: fmt.Sprintf("%s-%04d", prefix, i), Source: "jsonl", Topic: "tool.email.send",
					ReasonCode: "timeout", IdempotencyKey: fmt.Sprintf("key-%s-%04d", prefix, i), Payload: []byte(`{"n":1}`),
					FirstFailure: when}
				ref := e.Ref()
				*list = append(*list, ref)
				if err := tx.PutEntry(&store.EntryRecord{Entry: e, Status: status, FirstSeen: when, LastSeen: when}); err != nil {
					return err
				}
				if _, err := tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, From: idempotency.None, To: idempotency.Decided, EntryRef: ref}); err != nil {
					return err
				}
				if _, err := tx.Append(&audit.Record{Time: when, Actor: "test", Kind: audit.KindDecision, EntryRef: ref, Key: e.IdempotencyKey}); err != nil {
					return err
				}
				if _, err := tx.Append(&audit.Record{Time: when.Add(time.Second), Actor: "test", Kind: audit.KindOutcome, EntryRef: ref, Outcome: "succeeded"}); err != nil {
					return err
				}
				if i%5 == 0 {
					id := "apr-" + e.ID
					fx.Approvals = append(fx.Approvals, id)
					if err := tx.PutApproval(&store.Approval{ID: id, EntryRef: ref, EntryID: e.ID, Key: e.IdempotencyKey,
						State: store.ApprovalPending, RequestedAt: when}); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	add(closedOld, "old", store.StatusReplayed, pruneT0, &fx.ClosedOld)
	add(open, "open", store.StatusQuarantined, pruneT0.Add(5*24*time.Hour), &fx.Open)
	add(closedNew, "new", store.StatusResolved, pruneT0.Add(20*24*time.Hour), &fx.ClosedNew)
	return fx
}

// LiveRefs reads the refs of the stored entries.
func LiveRefs(t *testing.T, st store.Backend) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if err := st.Entries(context.Background(), func(er *store.EntryRecord) error {
		out[er.Entry.Ref()] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// archivedRefs reads the entry refs an archive holds (nil, nil when the
// archive is not there or not finished: then nothing may be gone).
func archivedRefs(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]bool{}
	err = audit.ReadArchive(f, func(l *audit.ArchiveLine) error {
		if l.Type == audit.LineEntry {
			var er store.EntryRecord
			if err := json.Unmarshal(l.Entry, &er); err != nil {
				return err
			}
			out[er.Entry.Ref()] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("archive %s: %v", path, err)
	}
	return out
}

// CheckPrunedStore is checkPruned on an open store (either backend).
func CheckPrunedStore(t *testing.T, st store.Backend, archives []string, fx *PruneFixture) (live map[string]bool) {
	t.Helper()
	res, err := audit.VerifyWith(context.Background(), st, audit.VerifyOptions{Key: PruneKey})
	if err != nil || !res.OK() {
		t.Fatalf("live chain: %v %+v", err, res)
	}
	arch := map[string]bool{}
	var readers []io.Reader
	for _, a := range archives {
		refs := archivedRefs(t, a)
		if refs == nil {
			continue
		}
		for r := range refs {
			arch[r] = true
		}
		f, err := os.Open(a)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		readers = append(readers, f)
	}
	if len(readers) > 0 {
		res, err := audit.VerifyArchived(context.Background(), readers, st, audit.VerifyOptions{Key: PruneKey})
		if err != nil || !res.OK() {
			t.Fatalf("archives + live: %v %+v", err, res)
		}
	}
	live = LiveRefs(t, st)
	for _, ref := range fx.ClosedOld {
		if !live[ref] && !arch[ref] {
			t.Fatalf("%s is neither live nor archived: lost", ref)
		}
	}
	for _, ref := range append(append([]string{}, fx.Open...), fx.ClosedNew...) {
		if !live[ref] {
			t.Fatalf("%s (open, or closed after the cut) was removed", ref)
		}
	}
	return live
}

// PruneArchiveEnv names a prune child's archive; MarkArchived is the line
// the child prints once the archive is durable (the kill tests).
const (
	PruneArchiveEnv = "REPLAYCTL_PRUNE_ARCHIVE"
	MarkArchived    = "prune-child: archived"
)
