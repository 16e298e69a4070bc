package replay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Issue 14: an idempotency key or id over 32 KiB made bbolt refuse the
// write, and the error cancelled the whole run, every run. Such entries
// are now stored under a hash of the key (the original kept in the
// record), so they are handled like any other; the others are too.
func TestOversizedKeyAndIDDoNotStopTheRun(t *testing.T) {
	b := newBundle(t, baseRules)
	longKey := strings.Repeat("k", 33*1024)
	longID := strings.Repeat("i", 33*1024)
	src := b.jsonl("dlq.jsonl",
		transient("a1", "order-1:email"),
		transient("big-key", longKey),
		transient(longID, "order-2:email"),
		transient("a2", "order-3:email"))
	rep := b.run(b.reconciler(2), src)
	got := b.sink.perKey()
	for _, k := range []string{"order-1:email", "order-2:email", "order-3:email", longKey} {
		if got[k] != 1 {
			t.Errorf("key %.20s… delivered %d times, want 1", k, got[k])
		}
	}
	if rep.EntryErrors != 0 || rep.Replays.Succeeded != 4 {
		t.Fatalf("report: %d entry errors, %d succeeded", rep.EntryErrors, rep.Replays.Succeeded)
	}
	if er := b.entry("jsonl:" + longID); er.Entry.ID != longID || er.Status != store.StatusReplayed {
		t.Fatalf("long id entry: status %s, id kept %v", er.Status, er.Entry.ID == longID)
	}
	if v := b.ledger(longKey); v.State != triage.StateSucceeded {
		t.Fatalf("long key ledger: %+v", v)
	}
	// A second run finds them committed: nothing is sent again.
	b.run(b.reconciler(2), src)
	if n := len(b.sink.deliveries()); n != 4 {
		t.Fatalf("second run: %d deliveries in all, want 4", n)
	}
}

// panicTarget panics for one key: a stand-in for any bug met while
// handling one entry (a dispatcher, a source's write-back, the policy).
type panicTarget struct {
	next Dispatcher
	key  string
}

func (p *panicTarget) Dispatch(ctx context.Context, r Request) Result {
	if r.Key == p.key {
		panic("boom while dispatching " + r.Key)
	}
	return p.next.Dispatch(ctx, r)
}

// A panic (or any error) while handling one entry quarantines that entry
// with the reason, audited, and the run goes on with the others.
func TestPanicWhileHandlingOneEntryQuarantinesItAndTheRunGoesOn(t *testing.T) {
	b := newBundle(t, baseRules)
	r := b.reconciler(1)
	h := NewHTTPTarget(b.sink.URL+"/replay", "", 2*time.Second, nil)
	r.Router = NewRulesRouter(b.engine.Rules, &Route{Name: "sink", Dispatcher: &panicTarget{next: h, key: "bad"}})
	src := b.jsonl("dlq.jsonl", transient("e1", "good-1"), transient("e2", "bad"), transient("e3", "good-2"))
	rep, err := r.Run(context.Background(), []source.Source{src})
	if err != nil {
		t.Fatalf("one entry's panic ended the run: %v", err)
	}
	if got := b.sink.perKey(); got["good-1"] != 1 || got["good-2"] != 1 || got["bad"] != 0 {
		t.Fatalf("deliveries %v", got)
	}
	if rep.EntryErrors != 1 {
		t.Fatalf("entry errors %d, want 1", rep.EntryErrors)
	}
	er := b.entry("jsonl:e2")
	if er.Status != store.StatusQuarantined || er.Hold != store.HoldQuarantine || !strings.Contains(er.Reason, "boom") {
		t.Fatalf("bad entry: %s hold %q %q", er.Status, er.Hold, er.Reason)
	}
	n := 0
	_ = audit.Each(context.Background(), b.store, audit.Query{Kind: audit.KindDecision}, func(rec audit.Record) error {
		if rec.EntryRef == "jsonl:e2" && rec.Outcome == "entry_error" {
			n++
		}
		return nil
	})
	if n != 1 {
		t.Fatalf("%d audit records of the quarantine, want 1", n)
	}
}
