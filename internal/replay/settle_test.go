package replay

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

// TestLiveCordumUnknownOutcomeIsSettled: the retry reached Cordum (the job
// was created and the DLQ entry deleted, handlers_dlq.go handleRetryDLQ)
// but the answer was lost: outcome_unknown. A live read no longer lists
// the entry, so before issue 27 later runs never asked about it again and
// it stayed outcome_unknown. Every run now probes such entries of systems
// that can answer: gone is committed, settled without a second retry.
func TestLiveCordumUnknownOutcomeIsSettled(t *testing.T) {
	b := newBundle(t, baseRules)
	cordumUnknownSettles(t, b, b.store)
}

// TestLiveCordumUnknownOutcomeIsSettledPostgres: the same on the shared
// store, where a run claims the entry and probes it under its claim.
func TestLiveCordumUnknownOutcomeIsSettledPostgres(t *testing.T) {
	b, pg := sharedBundle(t)
	cordumUnknownSettles(t, b, pg)
}

func cordumUnknownSettles(t *testing.T, b *testBundle, st Store) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	f := newFakeCordum(t, "job_u", "job_w")
	f.DropAfterDelete = true
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	liveRun(t, b, st, src)
	lost := ""
	for _, id := range []string{"job_u", "job_w"} {
		if er := storedEntry(t, st, "cordum:"+id); er.Status == store.StatusUnknown {
			lost = id
		}
	}
	if lost == "" {
		t.Fatal("no entry was left outcome_unknown by the lost answer")
	}
	rep := liveRun(t, b, st, src)
	if rep.ProbedCommitted != 1 {
		t.Errorf("second run probed %d committed, want 1", rep.ProbedCommitted)
	}
	er := storedEntry(t, st, "cordum:"+lost)
	if er.Status != store.StatusResolved {
		t.Errorf("%s after the second run: %s %q", lost, er.Status, er.Reason)
	}
	v, err := st.LedgerView(context.Background(), er.Entry.IdempotencyKey)
	if err != nil {
		t.Fatal(err)
	}
	if v.State != triage.StateSucceeded {
		t.Errorf("%s ledger %+v", lost, v)
	}
	// Later runs: Cordum no longer lists either entry, so nothing is
	// taken out of its DLQ and nothing says so; the settled entry stays
	// resolved. On PostgreSQL every run handles every stored entry: before
	// the fix runs 3 and 4 sent a DELETE for each, audited as done, and
	// turned the settled entry "replayed".
	liveRun(t, b, st, src)
	liveRun(t, b, st, src)
	if er := storedEntry(t, st, "cordum:"+lost); er.Status != store.StatusResolved {
		t.Errorf("%s after four runs: %s %q", lost, er.Status, er.Reason)
	}
	wbs := writeBacksDone(t, st)
	for _, id := range []string{"job_u", "job_w"} {
		if n := f.Calls(id); n != 1 {
			t.Errorf("%s: %d retry calls, want 1", id, n)
		}
		f.Mu.Lock()
		d := f.Deletes[id]
		f.Mu.Unlock()
		if d != 0 || wbs["cordum:"+id] != 0 {
			t.Errorf("%s: %d DELETEs, %d write-back records saying it was taken out; want none", id, d, wbs["cordum:"+id])
		}
	}
}

// writeBacksDone counts the audit records saying an entry was taken out
// of its source's DLQ, by entry ref.
func writeBacksDone(t *testing.T, st Store) map[string]int {
	t.Helper()
	rd, ok := st.(audit.Reader)
	if !ok {
		t.Fatalf("%T keeps no audit chain", st)
	}
	n := map[string]int{}
	if err := audit.Each(context.Background(), rd, audit.Query{}, func(r audit.Record) error {
		if r.Kind == audit.KindWriteBack && r.Outcome == "done" {
			n[r.EntryRef]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLiveNexoraUnknownOutcomeIsSettled: Nexora marked the record REPLAYED
// but the answer was lost; the live read lists PENDING records only, so
// the next run asks Nexora about it and settles it.
func TestLiveNexoraUnknownOutcomeIsSettled(t *testing.T) {
	b := newBundle(t, "version: v1\ntaxonomy: {transient: [step_failed]}\n")
	nexoraUnknownSettles(t, b, b.store)
}

// TestLiveNexoraUnknownOutcomeIsSettledPostgres: the same on the shared
// store.
func TestLiveNexoraUnknownOutcomeIsSettledPostgres(t *testing.T) {
	b := newBundle(t, "version: v1\ntaxonomy: {transient: [step_failed]}\n")
	pg, err := postgres.Open(context.Background(), testsvc.Postgres(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	nexoraUnknownSettles(t, b, pg)
}

func nexoraUnknownSettles(t *testing.T, b *testBundle, st Store) {
	t.Setenv("NEXORA_TOKEN", testNexoraTok)
	f := newFakeNexora(t, map[string]string{"dl-u": "PENDING"})
	f.DropAnswer = true
	src, err := source.Parse("nexora:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	liveRun(t, b, st, src)
	if er := storedEntry(t, st, "nexora:dl-u"); er.Status != store.StatusUnknown {
		t.Fatalf("after the lost answer: %s %q", er.Status, er.Reason)
	}
	rep := liveRun(t, b, st, src)
	if er := storedEntry(t, st, "nexora:dl-u"); er.Status != store.StatusResolved {
		t.Errorf("after the second run: %s %q", er.Status, er.Reason)
	}
	if rep.ProbedCommitted != 1 {
		t.Errorf("second run probed %d committed, want 1", rep.ProbedCommitted)
	}
	f.Mu.Lock()
	n := f.Replays["dl-u"]
	f.Mu.Unlock()
	if n != 1 {
		t.Errorf("%d replays, want 1", n)
	}
}

// TestCordumKeptAfterRetryIsDeleted: Cordum answered the retry 200 but its
// delete of the DLQ entry failed (handlers_dlq.go:231-233 at e00450ed logs
// it and answers 200). replayctl rightly never retries it again; it now
// also takes the entry out (DELETE /api/v1/dlq/{job_id}), so Cordum's own
// Retry button cannot run the job a second time.
func TestCordumKeptAfterRetryIsDeleted(t *testing.T) {
	b := newBundle(t, baseRules)
	keptDeletedOnce(t, b, b.store)
}

// TestCordumKeptAfterRetryIsDeletedOncePostgres: the same on the shared
// store, where every run handles every stored entry, listed or not.
// Before the fix four runs sent three DELETEs, each audited as "taken out
// of the source's DLQ", and the entry went on being handled as kept.
func TestCordumKeptAfterRetryIsDeletedOncePostgres(t *testing.T) {
	b, pg := sharedBundle(t)
	keptDeletedOnce(t, b, pg)
}

// keptDeletedOnce: over four runs a kept entry is retried once, deleted
// once, with one write-back record, and its status does not change after
// the delete.
func keptDeletedOnce(t *testing.T, b *testBundle, st Store) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	f := newFakeCordum(t, "job_k")
	f.Keep = true
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	liveRun(t, b, st, src)
	f.Keep = false
	liveRun(t, b, st, src)
	f.Mu.Lock()
	deletes, left := f.Deletes["job_k"], f.DLQ["job_k"]
	f.Mu.Unlock()
	if f.Calls("job_k") != 1 || deletes != 1 || left {
		t.Errorf("retries %d, deletes %d, still in the DLQ %v: want one retry, then one delete", f.Calls("job_k"), deletes, left)
	}
	status := storedEntry(t, st, "cordum:job_k").Status
	for run := 3; run <= 4; run++ {
		liveRun(t, b, st, src)
		if er := storedEntry(t, st, "cordum:job_k"); er.Status != status {
			t.Errorf("run %d: status %s, was %s after the delete", run, er.Status, status)
		}
	}
	f.Mu.Lock()
	deletes = f.Deletes["job_k"]
	f.Mu.Unlock()
	if n := writeBacksDone(t, st)["cordum:job_k"]; f.Calls("job_k") != 1 || deletes != 1 || n != 1 {
		t.Errorf("four runs: retries %d, deletes %d, write-back records %d; want 1 each", f.Calls("job_k"), deletes, n)
	}
}

// TestTwoWorkersSettleUnknownOutcomesOncePostgres: every retry reached
// Cordum but every answer was lost, so all the entries are outcome_unknown
// and gone from Cordum's DLQ. Two workers then run at once on the same
// PostgreSQL store: each entry is probed by one of them only (its claim),
// settled once, with one probe record in the audit chain, and never
// retried again.
func TestTwoWorkersSettleUnknownOutcomesOncePostgres(t *testing.T) {
	twoWorkersSettle(t, true)
}

// TestTwoWorkersUnknownNotCommittedAskPersonPostgres: the same, but the
// jobs are back in Cordum's DLQ (the retry never took): each probe says
// not committed, and as on bbolt the entry waits for a person; neither
// worker sends it again.
func TestTwoWorkersUnknownNotCommittedAskPersonPostgres(t *testing.T) {
	twoWorkersSettle(t, false)
}

func twoWorkersSettle(t *testing.T, committed bool) {
	b, pg := sharedBundle(t)
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	var ids []string
	for i := range 12 {
		ids = append(ids, fmt.Sprintf("job_%02d", i))
	}
	f := newFakeCordum(t, ids...)
	f.Drops = len(ids)
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	liveRun(t, b, pg, src)
	for _, id := range ids {
		if er := storedEntry(t, pg, "cordum:"+id); er.Status != store.StatusUnknown {
			t.Fatalf("%s after the lost answers: %s %q", id, er.Status, er.Reason)
		}
	}
	if !committed {
		f.Mu.Lock()
		for _, id := range ids {
			f.DLQ[id] = true
		}
		f.Mu.Unlock()
	}
	var wg sync.WaitGroup
	reps := make([]*Report, 2)
	for w := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lr := NewOriginRouter(NewRulesRouter(b.engine.Rules, nil), false, CredentialsFromEnv(os.Getenv))
			r := &Reconciler{Engine: b.engine, Store: pg, Clock: SystemClock{}, Actor: "ops-bot", MaxParallel: 2, Router: lr, Owner: fmt.Sprintf("w%d", w)}
			rep, err := r.Run(context.Background(), []source.Source{src})
			if err != nil {
				t.Error(err)
			}
			reps[w] = rep
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	liveRun(t, b, pg, src) // a later run changes nothing
	want := len(ids)
	if !committed {
		want = 0
	}
	if n := reps[0].ProbedCommitted + reps[1].ProbedCommitted; n != want {
		t.Errorf("the workers settled %d+%d, want %d in all", reps[0].ProbedCommitted, reps[1].ProbedCommitted, want)
	}
	probes := map[string]int{}
	if err := audit.Each(context.Background(), pg, audit.Query{}, func(r audit.Record) error {
		if r.Kind == audit.KindProbe {
			probes[r.EntryRef]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wbs := writeBacksDone(t, pg)
	for _, id := range ids {
		ref := "cordum:" + id
		er := storedEntry(t, pg, ref)
		v, err := pg.LedgerView(context.Background(), er.Entry.IdempotencyKey)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !committed:
			if er.Status != store.StatusAwaitingApproval || v.State == triage.StateSucceeded {
				t.Errorf("%s: %s %q, ledger %+v: want awaiting_approval", id, er.Status, er.Reason, v)
			}
		// Settled: resolved, also after a worker whose run began after
		// the settle handled it again, and after a third run.
		case er.Status != store.StatusResolved, v.State != triage.StateSucceeded:
			t.Errorf("%s: %s %q, ledger %+v", id, er.Status, er.Reason, v)
		}
		if probes[ref] != 1 {
			t.Errorf("%s: %d probe records, want 1", id, probes[ref])
		}
		if n := f.Calls(id); n != 1 {
			t.Errorf("%s: %d retry calls, want 1", id, n)
		}
		f.Mu.Lock()
		d := f.Deletes[id]
		f.Mu.Unlock()
		if d != 0 || wbs[ref] != 0 {
			t.Errorf("%s: %d DELETEs, %d write-back records; want none", id, d, wbs[ref])
		}
	}
}
