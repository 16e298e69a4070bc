// Package storetest is the conformance suite every state backend passes:
// the same ledger, audit-chain, entry and approval tests run against bbolt
// and PostgreSQL. It is imported by tests only.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
)

// Run runs the suite; open returns a fresh, empty backend.
func Run(t *testing.T, open func(t *testing.T) store.Backend) {
	tests := map[string]func(*testing.T, store.Backend){
		"StateMachineThroughTheStore": stateMachine,
		"CompareAndSetHasOneWinner":   oneWinner,
		"FirstTransitionRace":         firstTransitionRace,
		"FailedUpdateWritesNothing":   rollback,
		"AuditChainManyWriters":       auditManyWriters,
		"EntriesKeepPayloadVerbatim":  entriesVerbatim,
		"ApprovalsRoundTrip":          approvals,
		"SnapshotsKeptOnce":           snapshots,
		"OutcomeIsGuardedByAttempt":   outcomeCAS,
		"PageMatchesScan":             pageMatchesScan,
		"CountersFollowWrites":        countersFollowWrites,
		"LineagesRoundTrip":           lineages,
		"GroupsFollowWrites":          groupsFollowWrites,
		"OldestOpenIsByLastFailure":   oldestOpenByLastFailure,
		"SortedPagesMatchScan":        sortedPages,
		"AuditRangesMatchScan":        auditRanges,
		"ChainReadersAgree":           chainReaders,
		"ApprovalIndexesMatchScan":    approvalIndexes,
		"IDsAndGaugesMatchScan":       idsAndGauges,
		"ClaimsAreLeasedAndFenced":    claims,
		"PruneArchivesAndVerifies":    pruneArchives,
		"ChainSucceededReadsOutcomes": chainSucceeded,
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) { fn(t, open(t)) })
	}
}

func transition(ctx context.Context, s store.Backend, tr idempotency.Transition) (idempotency.Record, error) {
	var rec idempotency.Record
	err := s.Update(ctx, func(tx store.Tx) error {
		var err error
		rec, err = tx.Transition(tr)
		return err
	})
	return rec, err
}

func stateMachine(t *testing.T, s store.Backend) {
	ctx := context.Background()
	steps := []struct {
		from, to idempotency.State
		want     error
	}{
		{idempotency.None, idempotency.Decided, nil},
		{idempotency.Decided, idempotency.Dispatching, nil},
		{idempotency.Decided, idempotency.Dispatching, idempotency.ErrConflict}, // stale view
		{idempotency.Dispatching, idempotency.Decided, nil},                     // retryable
		{idempotency.Decided, idempotency.Dispatching, nil},
		{idempotency.Dispatching, idempotency.OutcomeUnknown, nil},
		{idempotency.OutcomeUnknown, idempotency.Dispatching, idempotency.ErrIllegal},
		{idempotency.OutcomeUnknown, idempotency.Succeeded, nil},
		{idempotency.Succeeded, idempotency.Decided, idempotency.ErrIllegal},
	}
	for i, st := range steps {
		_, err := transition(ctx, s, idempotency.Transition{Key: "k", From: st.from, To: st.to, EntryRef: "jsonl:e", PayloadHash: "h"})
		if !errors.Is(err, st.want) {
			t.Fatalf("step %d %s->%s: got %v, want %v", i, st.from, st.to, err, st.want)
		}
	}
	v, err := s.LedgerView(ctx, "k")
	if err != nil || v.State != string(idempotency.Succeeded) || v.Replays != 2 || v.PayloadHash != "h" {
		t.Fatalf("view %+v %v", v, err)
	}
	if _, err := transition(ctx, s, idempotency.Transition{Key: "k2", To: idempotency.Decided, PayloadHash: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := transition(ctx, s, idempotency.Transition{Key: "k2", From: idempotency.Decided, To: idempotency.Dispatching, PayloadHash: "b"}); !errors.Is(err, idempotency.ErrPayloadMismatch) {
		t.Fatalf("payload mismatch: %v", err)
	}
	n := 0
	if err := s.LedgerRecords(ctx, func(*idempotency.Record) error { n++; return nil }); err != nil || n != 2 {
		t.Fatalf("records %d %v", n, err)
	}
}

// outcomeCAS: the dispatching record names its owner and attempt, kept
// by the backend; an outcome for another attempt or owner is refused and
// writes nothing (issue 14: a stale 200 booked against a later attempt).
func outcomeCAS(t *testing.T, s store.Backend) {
	ctx := context.Background()
	if _, err := transition(ctx, s, idempotency.Transition{Key: "k", To: idempotency.Decided, EntryRef: "jsonl:e"}); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		rec, err := transition(ctx, s, idempotency.Transition{Key: "k", From: idempotency.Decided, To: idempotency.Dispatching, Owner: "host:1:aa"})
		if err != nil || rec.Replays != attempt || rec.Owner != "host:1:aa" {
			t.Fatalf("claim %d: %+v %v", attempt, rec, err)
		}
		if attempt == 1 {
			if _, err := transition(ctx, s, idempotency.Transition{Key: "k", From: idempotency.Dispatching, To: idempotency.Decided, Owner: "host:1:aa", Attempt: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, stale := range []idempotency.Transition{
		{Key: "k", From: idempotency.Dispatching, To: idempotency.Succeeded, Owner: "host:1:aa", Attempt: 1},
		{Key: "k", From: idempotency.Dispatching, To: idempotency.Succeeded, Owner: "host:2:bb", Attempt: 2},
	} {
		if _, err := transition(ctx, s, stale); !errors.Is(err, idempotency.ErrConflict) {
			t.Fatalf("stale outcome %+v: %v, want ErrConflict", stale, err)
		}
	}
	var stored *idempotency.Record
	if err := s.View(ctx, func(tx store.Tx) error {
		var err error
		stored, err = tx.Ledger("k")
		return err
	}); err != nil || stored == nil || stored.State != idempotency.Dispatching || stored.Owner != "host:1:aa" || stored.Replays != 2 {
		t.Fatalf("after stale outcomes: %+v %v", stored, err)
	}
	if _, err := transition(ctx, s, idempotency.Transition{Key: "k", From: idempotency.Dispatching, To: idempotency.Succeeded, Owner: "host:1:aa", Attempt: 2}); err != nil {
		t.Fatalf("current outcome: %v", err)
	}
}

func oneWinner(t *testing.T, s store.Backend) {
	ctx := context.Background()
	if _, err := transition(ctx, s, idempotency.Transition{Key: "k", To: idempotency.Decided}); err != nil {
		t.Fatal(err)
	}
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := transition(ctx, s, idempotency.Transition{Key: "k", From: idempotency.Decided, To: idempotency.Dispatching})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, idempotency.ErrConflict):
				conflicts.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != 11 {
		t.Fatalf("wins %d conflicts %d", wins.Load(), conflicts.Load())
	}
}

func firstTransitionRace(t *testing.T, s store.Backend) {
	ctx := context.Background()
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := transition(ctx, s, idempotency.Transition{Key: "new", To: idempotency.Decided}); err == nil {
				wins.Add(1)
			} else if !errors.Is(err, idempotency.ErrConflict) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d first transitions won", wins.Load())
	}
}

func rollback(t *testing.T, s store.Backend) {
	ctx := context.Background()
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Transition(idempotency.Transition{Key: "k", To: idempotency.Decided}); err != nil {
			return err
		}
		if _, err := tx.Append(&audit.Record{Kind: audit.KindDecision, Key: "k"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	v, _ := s.LedgerView(ctx, "k")
	seq, head, _ := s.AuditHead(ctx)
	if v.State != "" || seq != 0 || head != audit.Genesis {
		t.Fatalf("rolled back update left %+v, audit %d", v, seq)
	}
}

func auditManyWriters(t *testing.T, s store.Backend) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				if err := s.Update(ctx, func(tx store.Tx) error {
					_, err := tx.Append(&audit.Record{Kind: audit.KindDecision, Actor: fmt.Sprintf("w%d", w), EntryRef: fmt.Sprintf("jsonl:%d-%d", w, i)})
					return err
				}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	res, err := audit.Verify(ctx, s, nil)
	if err != nil || !res.OK() || res.Records != 60 {
		t.Fatalf("verify %+v %v", res, err)
	}
}

func entriesVerbatim(t *testing.T, s store.Backend) {
	ctx := context.Background()
	e := entry.Entry{ID: "e1", Source: "jsonl", Payload: []byte("{\n  \"amount\": 10.50,  \"to\": \"x\"\n}")}
	e.EnsureKey()
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusPending})
	}); err != nil {
		t.Fatal(err)
	}
	var got *store.EntryRecord
	_ = s.View(ctx, func(tx store.Tx) error {
		var err error
		got, err = tx.Entry("jsonl:e1")
		return err
	})
	if got == nil || string(got.Entry.Payload) != string(e.Payload) {
		t.Fatalf("payload not verbatim: %+v", got)
	}
	n := 0
	_ = s.Entries(ctx, func(*store.EntryRecord) error { n++; return nil })
	if n != 1 {
		t.Fatalf("entries %d", n)
	}
}

func approvals(t *testing.T, s store.Backend) {
	ctx := context.Background()
	a := &store.Approval{ID: "apr_1", EntryRef: "jsonl:e1", State: store.ApprovalPending, ApproverGroup: "g"}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutApproval(a) }); err != nil {
		t.Fatal(err)
	}
	a.State = store.ApprovalApproved
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutApproval(a) }); err != nil {
		t.Fatal(err)
	}
	var got []*store.Approval
	_ = s.Approvals(ctx, func(a *store.Approval) error { got = append(got, a); return nil })
	if len(got) != 1 || got[0].State != store.ApprovalApproved {
		t.Fatalf("%+v", got)
	}
}

func snapshots(t *testing.T, s store.Backend) {
	ctx := context.Background()
	if err := s.PutSnapshot(ctx, "sha256:x", map[string]string{"v": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSnapshot(ctx, "sha256:x", map[string]string{"v": "2"}); err != nil {
		t.Fatal(err)
	}
	var out map[string]string
	if err := s.Snapshot(ctx, "sha256:x", &out); err != nil || out["v"] != "1" {
		t.Fatalf("%v %v", out, err)
	}
	if err := s.Snapshot(ctx, "sha256:nope", &out); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing snapshot: %v", err)
	}
}
