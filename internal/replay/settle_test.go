package replay

import (
	"testing"

	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// TestLiveCordumUnknownOutcomeIsSettled: the retry reached Cordum (the job
// was created and the DLQ entry deleted, handlers_dlq.go handleRetryDLQ)
// but the answer was lost: outcome_unknown. A live read no longer lists
// the entry, so before issue 27 later runs never asked about it again and
// it stayed outcome_unknown. Every run now probes such entries of systems
// that can answer: gone is committed, settled without a second retry.
func TestLiveCordumUnknownOutcomeIsSettled(t *testing.T) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	b := newBundle(t, baseRules)
	f := newFakeCordum(t, "job_u", "job_w")
	f.dropAfterDelete = true
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	liveRun(t, b, b.store, src)
	lost := ""
	for _, id := range []string{"job_u", "job_w"} {
		if er := b.entry("cordum:" + id); er.Status == store.StatusUnknown {
			lost = id
		}
	}
	if lost == "" {
		t.Fatal("no entry was left outcome_unknown by the lost answer")
	}
	rep := liveRun(t, b, b.store, src)
	if rep.ProbedCommitted != 1 {
		t.Errorf("second run probed %d committed, want 1", rep.ProbedCommitted)
	}
	er := b.entry("cordum:" + lost)
	if er.Status != store.StatusResolved {
		t.Errorf("%s after the second run: %s %q", lost, er.Status, er.Reason)
	}
	if v := b.ledger(er.Entry.IdempotencyKey); v.State != triage.StateSucceeded {
		t.Errorf("%s ledger %+v", lost, v)
	}
	for _, id := range []string{"job_u", "job_w"} {
		if n := f.calls(id); n != 1 {
			t.Errorf("%s: %d retry calls, want 1", id, n)
		}
	}
}

// TestLiveNexoraUnknownOutcomeIsSettled: Nexora marked the record REPLAYED
// but the answer was lost; the live read lists PENDING records only, so
// the next run asks Nexora about it and settles it.
func TestLiveNexoraUnknownOutcomeIsSettled(t *testing.T) {
	t.Setenv("NEXORA_TOKEN", testNexoraTok)
	b := newBundle(t, "version: v1\ntaxonomy: {transient: [step_failed]}\n")
	f := newFakeNexora(t, map[string]string{"dl-u": "PENDING"})
	f.dropAnswer = true
	src, err := source.Parse("nexora:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	liveRun(t, b, b.store, src)
	if er := b.entry("nexora:dl-u"); er.Status != store.StatusUnknown {
		t.Fatalf("after the lost answer: %s %q", er.Status, er.Reason)
	}
	liveRun(t, b, b.store, src)
	if er := b.entry("nexora:dl-u"); er.Status != store.StatusResolved {
		t.Errorf("after the second run: %s %q", er.Status, er.Reason)
	}
	f.mu.Lock()
	n := f.replays["dl-u"]
	f.mu.Unlock()
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
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	b := newBundle(t, baseRules)
	f := newFakeCordum(t, "job_k")
	f.keep = true
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	liveRun(t, b, b.store, src)
	f.keep = false
	liveRun(t, b, b.store, src)
	f.mu.Lock()
	deletes, left := f.deletes["job_k"], f.dlq["job_k"]
	f.mu.Unlock()
	if f.calls("job_k") != 1 || deletes != 1 || left {
		t.Errorf("retries %d, deletes %d, still in the DLQ %v: want one retry, then one delete", f.calls("job_k"), deletes, left)
	}
	liveRun(t, b, b.store, src)
	f.mu.Lock()
	deletes = f.deletes["job_k"]
	f.mu.Unlock()
	if f.calls("job_k") != 1 || deletes != 1 {
		t.Errorf("third run: retries %d, deletes %d", f.calls("job_k"), deletes)
	}
}
