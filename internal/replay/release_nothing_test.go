package replay

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

// Issue 15: `dlq replay ID` that dispatched nothing exited 0 and said
// nothing. Each "nothing done" now names why and what to do.
func TestSingleReplayThatDoesNothingSaysWhy(t *testing.T) {
	b := newBundle(t, baseRules)
	ctx := context.Background()
	b.sink.status = func(string, int) int { return http.StatusServiceUnavailable }
	src := b.jsonl("dlq.jsonl",
		map[string]any{"id": "f1", "topic": "tool.flaky.sync", "reason_code": "timeout", "idempotency_key": "f1"},
		highRisk("h1", "kh1"))
	// Retries are scheduled, not slept: the run waits for them on its clock.
	b.run(waitingFor(time.Hour, b.reconciler(1)), src)
	if n := b.sink.perKey()["f1"]; n != 2 {
		t.Fatalf("setup: %d deliveries of f1, want 2 (max_replays)", n)
	}

	cases := []struct{ ref, want string }{
		{"jsonl:f1", "max_replays reached (2 of 2)"},
		{"jsonl:h1", "awaits approval"},
	}
	for _, c := range cases {
		res, err := b.reconciler(1).One(ctx, b.entry(c.ref))
		if err != nil {
			t.Fatalf("%s: %v", c.ref, err)
		}
		err = NothingDone(&res)
		if !errors.Is(err, ErrNothingDone) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.ref) {
			t.Errorf("%s: %v, want ErrNothingDone saying %q", c.ref, err, c.want)
		}
	}
	if n := b.sink.perKey()["f1"]; n != 2 {
		t.Fatalf("a refused single replay dispatched: %d deliveries", n)
	}

	// No target: says so.
	r := b.reconciler(1)
	r.Router = NewRulesRouter(b.engine.Rules, nil)
	nt := b.jsonl("nt.jsonl", transient("n1", "kn1"))
	b.run(r, nt)
	res, err := r.One(ctx, b.entry("jsonl:n1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := NothingDone(&res); !errors.Is(err, ErrNothingDone) || !strings.Contains(err.Error(), WhyNoTarget) {
		t.Errorf("no target: %v", err)
	}

	// A replay that dispatched is not "nothing".
	b.sink.status = func(string, int) int { return http.StatusOK }
	if _, err := Release(ctx, b.store, "jsonl:f1", "alice", "fixed"); err != nil {
		t.Fatal(err)
	}
	res, err = b.reconciler(1).One(ctx, b.entry("jsonl:f1"))
	if err != nil || NothingDone(&res) != nil || res.Status != store.StatusReplayed {
		t.Fatalf("after release: %v %v %s", err, NothingDone(&res), res.Status)
	}
}

// #13 leftover: an entry stored from a live Cordum gateway, replayed on
// its own later (`dlq replay ID`, `approvals approve --replay-now`: no
// source at hand), goes through Cordum's POST /api/v1/dlq/{job_id}/retry
// (cordum-io/cordum core/controlplane/gateway handlers_dlq.go) as a run's
// would, not to "no target". An explicit --target still wins.
func TestStoredLiveEntryReplaysThroughItsOwnSystem(t *testing.T) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	b := newBundle(t, baseRules)
	ctx := context.Background()
	f := newFakeCordum(t, "job_1", "job_2")
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	// Ingested by a run that had nowhere to send them.
	r := b.reconciler(1)
	r.Router = NewRulesRouter(b.engine.Rules, nil)
	b.run(r, src)
	if er := b.entry("cordum:job_1"); er.Status != store.StatusManualReview || f.Calls("job_1") != 0 {
		t.Fatalf("setup: %s %q, %d calls", er.Status, er.Reason, f.Calls("job_1"))
	}
	if _, err := Release(ctx, b.store, "cordum:job_1", "alice", "gateway reachable"); err != nil {
		t.Fatal(err)
	}

	r = b.reconciler(1)
	r.Router = NewOriginRouter(NewRulesRouter(b.engine.Rules, nil), false, CredentialsFromEnv(os.Getenv))
	res, err := r.One(ctx, b.entry("cordum:job_1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := NothingDone(&res); err != nil {
		t.Fatal(err)
	}
	if n := f.Calls("job_1"); n != 1 || res.Status != store.StatusReplayed {
		t.Fatalf("%d retry calls at Cordum, status %s %q", n, res.Status, res.Reason)
	}
	if len(b.sink.deliveries()) != 0 {
		t.Fatal("sent to the generic sink instead of Cordum")
	}

	// --target (Override) wins: job_2 goes to the sink.
	if _, err := Release(ctx, b.store, "cordum:job_2", "alice", "to the sink"); err != nil {
		t.Fatal(err)
	}
	h := NewHTTPTarget(b.sink.URL+"/replay", "", 0, nil)
	r = b.reconciler(1)
	r.Router = NewOriginRouter(NewRulesRouter(b.engine.Rules, &Route{Name: "sink", Dispatcher: h}), true, CredentialsFromEnv(os.Getenv))
	if _, err := r.One(ctx, b.entry("cordum:job_2")); err != nil {
		t.Fatal(err)
	}
	if f.Calls("job_2") != 0 || len(b.sink.deliveries()) != 1 {
		t.Fatalf("override: %d Cordum calls, %d sink deliveries", f.Calls("job_2"), len(b.sink.deliveries()))
	}
}
