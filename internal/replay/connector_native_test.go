package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/connector/cordum/cordumtest"
	"github.com/replayctl/replayctl/internal/connector/nexora/nexoratest"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

const (
	testCordumKey = "ck-secret-7f3a9b"
	testNexoraTok = "nx-secret-c41d2e"
)

// fakeCordum is the Cordum connector's one fake gateway (cordumtest),
// taking testCordumKey.
type fakeCordum = cordumtest.Gateway

func newFakeCordum(t *testing.T, ids ...string) *fakeCordum {
	return cordumtest.New(t, testCordumKey, ids...)
}

// fakeNexora is the Nexora connector's one fake server (nexoratest),
// taking testNexoraTok.
type fakeNexora = nexoratest.Server

func newFakeNexora(t *testing.T, states map[string]string) *fakeNexora {
	return nexoratest.New(t, testNexoraTok, states)
}

var testCreds = Credentials{CordumAPIKey: testCordumKey, CordumTenantID: "default", NexoraToken: testNexoraTok}

func req(id string) Request {
	return Request{Entry: &entry.Entry{ID: id}, Key: "k-" + id, Attempt: 1}
}

func noSecret(t *testing.T, what string, s string) {
	t.Helper()
	if strings.Contains(s, testCordumKey) || strings.Contains(s, testNexoraTok) {
		t.Errorf("%s contains a credential: %s", what, s)
	}
}

func TestCordumTargetOutcomes(t *testing.T) {
	f := newFakeCordum(t, "job_1")
	tg, err := NewCordumTarget(f.URL, 0, testCreds)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	res := tg.Dispatch(ctx, req("job_1"))
	if res.Outcome != Succeeded || !res.SourceUpdated || !regexp.MustCompile(`^job_1-retry-[0-9a-f]{8}$`).MatchString(res.NewJobID) {
		t.Fatalf("retry of a dead job: %+v", res)
	}
	// Cordum deleted the entry: a second retry is 404, handled elsewhere.
	if res := tg.Dispatch(ctx, req("job_1")); res.Outcome != HandledElsewhere || res.Status != 404 {
		t.Fatalf("retry of a gone job: %+v", res)
	}
	f.Fail = 1
	if res := tg.Dispatch(ctx, req("job_x")); res.Outcome != Retry {
		t.Fatalf("503: %+v", res)
	}
	bad, _ := NewCordumTarget(f.URL, 0, Credentials{CordumAPIKey: "wrong-" + testCordumKey})
	res = bad.Dispatch(ctx, req("job_1"))
	if res.Outcome != Failed || res.Status != 401 || !strings.Contains(res.Detail, "credentials") {
		t.Fatalf("401: %+v", res)
	}
	noSecret(t, "401 detail", res.Detail)
}

func TestNexoraTargetOutcomes(t *testing.T) {
	f := newFakeNexora(t, map[string]string{"dl-1": "PENDING", "dl-2": "RESOLVED"})
	tg, err := NewNexoraTarget(f.URL, 0, testCreds)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if res := tg.Dispatch(ctx, req("dl-1")); res.Outcome != Succeeded || res.Status != 202 || !res.SourceUpdated {
		t.Fatalf("202: %+v", res)
	}
	for _, id := range []string{"dl-1", "dl-2"} { // now REPLAYED; RESOLVED by a person
		if res := tg.Dispatch(ctx, req(id)); res.Outcome != HandledElsewhere || res.Status != 409 {
			t.Fatalf("%s 409: %+v", id, res)
		}
	}
	if res := tg.Dispatch(ctx, req("dl-gone")); res.Outcome != HandledElsewhere || res.Status != 404 {
		t.Fatalf("404: %+v", res)
	}
	bad, _ := NewNexoraTarget(f.URL, 0, Credentials{NexoraToken: "nope"})
	if res := bad.Dispatch(ctx, req("dl-1")); res.Outcome != Failed || res.Status != 401 {
		t.Fatalf("401: %+v", res)
	}
}

func TestParseTarget(t *testing.T) {
	for spec, want := range map[string]string{
		"cordum:http://gw:8080":  "*replay.CordumTarget",
		"nexora:https://nx:9000": "*replay.NexoraTarget",
		"http://sink/replay":     "*replay.HTTPTarget",
	} {
		rt, err := ParseTarget(spec, "", testCreds)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if got := typeName(rt.Dispatcher); got != want {
			t.Errorf("%s: %s, want %s", spec, got, want)
		}
	}
	if _, err := ParseTarget("cordum:gw:8080", "", testCreds); err == nil {
		t.Error("cordum: without an http(s) URL accepted")
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *CordumTarget:
		return "*replay.CordumTarget"
	case *NexoraTarget:
		return "*replay.NexoraTarget"
	case *HTTPTarget:
		return "*replay.HTTPTarget"
	}
	return "?"
}

// TestReconcileThroughCordumExactlyOnce: entries from a Cordum DLQ file,
// replayed with --target cordum:URL, are retried through Cordum once each;
// the new job id is in the outcome's audit record; an entry Cordum no
// longer has ends resolved and is never retried; a second run calls
// nothing; credentials appear in no audit record.
func TestReconcileThroughCordumExactlyOnce(t *testing.T) {
	b := newBundle(t, baseRules)
	f := newFakeCordum(t, "job_a", "job_b") // job_c was retried from Cordum's dashboard
	var lines []string
	for _, id := range []string{"job_a", "job_b", "job_c"} {
		lines = append(lines, `{"job_id":"`+id+`","topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason_code":"pool_overloaded","reason":"pool email overloaded","attempts":4,"created_at":"2026-11-20T10:00:00Z"}`)
	}
	p := filepath.Join(b.dir, "cordum.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.Parse("cordum:" + p)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := ParseTarget("cordum:"+f.URL, "", testCreds)
	if err != nil {
		t.Fatal(err)
	}
	rec := func() *Reconciler {
		return &Reconciler{Engine: b.engine, Store: b.store, Clock: b.clock, Actor: "ops-bot", MaxParallel: 2,
			Router: NewRulesRouter(b.engine.Rules, rt)}
	}
	b.run(rec(), src)
	for _, id := range []string{"job_a", "job_b", "job_c"} {
		if n := f.Calls(id); n != 1 {
			t.Errorf("%s: %d retry calls, want 1", id, n)
		}
	}
	if er := b.entry("cordum:job_a"); er.Status != store.StatusReplayed {
		t.Errorf("job_a: %s %q", er.Status, er.Reason)
	}
	if er := b.entry("cordum:job_c"); er.Status != store.StatusResolved || !strings.Contains(er.Reason, "no longer in the DLQ") {
		t.Errorf("job_c: %s %q", er.Status, er.Reason)
	}
	if v := b.ledger(b.entry("cordum:job_c").Entry.IdempotencyKey); v.State != triage.StateSucceeded {
		t.Errorf("job_c ledger %+v", v)
	}

	newJobs := map[string]string{}
	if err := audit.Each(context.Background(), b.store, audit.Query{}, func(r audit.Record) error {
		raw, _ := json.Marshal(r)
		noSecret(t, "audit record", string(raw))
		if r.Kind == audit.KindOutcome {
			var d struct {
				NewJobID string `json:"new_job_id"`
			}
			_ = json.Unmarshal(r.Detail, &d)
			newJobs[r.EntryID] = d.NewJobID
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(newJobs["job_a"], "job_a-retry-") || newJobs["job_c"] != "" {
		t.Errorf("new job ids in audit: %v", newJobs)
	}

	b.run(rec(), src)
	for _, id := range []string{"job_a", "job_b", "job_c"} {
		if n := f.Calls(id); n != 1 {
			t.Errorf("second run: %s has %d retry calls, want 1", id, n)
		}
	}
}

// TestRulesTargetsCordumAndNexora: rules.yaml targets `cordum: {url}` and
// `nexora: {url}` route through the systems; a target naming two kinds,
// or a non-http URL, is a configuration error.
func TestRulesTargetsCordumAndNexora(t *testing.T) {
	rules, err := triage.ParseRules("rules.yaml", []byte(`version: v1
targets:
  - name: cordum-gw
    match: {source: cordum-redis}
    cordum: {url: "http://gw:8080", timeout: 5s}
  - name: nexora
    match: {source: nexora}
    nexora: {url: "http://nx:9000"}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := NewRulesRouter(rules, nil)
	for src, want := range map[string]string{"cordum-redis": "*replay.CordumTarget", "nexora": "*replay.NexoraTarget"} {
		rt, ok := r.Route(&entry.Entry{ID: "x", Source: src})
		if !ok || typeName(rt.Dispatcher) != want {
			t.Errorf("%s: routed to %s (%v), want %s", src, typeName(rt.Dispatcher), ok, want)
		}
	}
	for _, bad := range []string{
		"targets:\n  - cordum: {url: \"http://gw\"}\n    nexora: {url: \"http://nx\"}\n",
		"targets:\n  - cordum: {url: \"gw:8080\"}\n",
	} {
		if _, err := triage.ParseRules("rules.yaml", []byte("version: v1\n"+bad)); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}

// TestLiveCordumSourceReplaysThroughCordum: a live Cordum DLQ of several
// pages is read completely; with no --target every entry is retried through
// Cordum's own endpoint exactly once; Cordum then no longer lists them; a
// second run calls nothing.
func TestLiveCordumSourceReplaysThroughCordum(t *testing.T) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	b := newBundle(t, baseRules)
	ids := []string{"job_1", "job_2", "job_3", "job_4", "job_5"}
	f := newFakeCordum(t, ids...)
	f.Ceiling = 2 // pages of two, each page's last entry listed again on the next
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	rec := func() *Reconciler {
		lr := NewOriginRouter(NewRulesRouter(b.engine.Rules, nil), false, CredentialsFromEnv(os.Getenv))
		return &Reconciler{Engine: b.engine, Store: b.store, Clock: b.clock, Actor: "ops-bot", MaxParallel: 2, Router: lr}
	}
	rep := b.run(rec(), src)
	if rep.Replays.Succeeded != len(ids) {
		t.Fatalf("replays %+v", rep.Replays)
	}
	for _, id := range ids {
		if n := f.Calls(id); n != 1 {
			t.Errorf("%s: %d retry calls, want 1", id, n)
		}
		if er := b.entry("cordum:" + id); er.Status != store.StatusReplayed {
			t.Errorf("%s: %s %q", id, er.Status, er.Reason)
		}
	}
	f.Mu.Lock()
	left := len(f.DLQ)
	f.Mu.Unlock()
	if left != 0 {
		t.Errorf("%d entries still in Cordum's DLQ", left)
	}
	b.run(rec(), src)
	for _, id := range ids {
		if n := f.Calls(id); n != 1 {
			t.Errorf("second run: %s has %d retry calls", id, n)
		}
	}
}

// TestCordumOutcomeUnknownIsProbed: the retry reached Cordum (the entry
// was deleted and a job created) but its answer was lost: outcome_unknown.
// The next run reads Cordum's DLQ without a --probe flag, finds the entry
// gone, records the key committed and never calls retry again.
func TestCordumOutcomeUnknownIsProbed(t *testing.T) {
	b := newBundle(t, baseRules)
	f := newFakeCordum(t, "job_u", "job_v")
	f.DropAfterDelete = true
	var lines []string
	for _, id := range []string{"job_u"} {
		lines = append(lines, `{"job_id":"`+id+`","topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason_code":"pool_overloaded","reason":"x","attempts":4,"created_at":"2026-11-20T10:00:00Z"}`)
	}
	p := filepath.Join(b.dir, "cordum.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.Parse("cordum:" + p)
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := ParseTarget("cordum:"+f.URL, "", testCreds)
	rec := &Reconciler{Engine: b.engine, Store: b.store, Clock: b.clock, Actor: "ops-bot", Router: NewRulesRouter(b.engine.Rules, rt)}
	b.run(rec, src)
	if er := b.entry("cordum:job_u"); er.Status != store.StatusUnknown {
		t.Fatalf("after the lost answer: %s %q", er.Status, er.Reason)
	}
	rep := b.run(rec, src)
	if f.Calls("job_u") != 1 {
		t.Fatalf("retry called %d times", f.Calls("job_u"))
	}
	if rep.ProbedCommitted != 1 {
		t.Fatalf("report: probed committed %d", rep.ProbedCommitted)
	}
	if v := b.ledger(b.entry("cordum:job_u").Entry.IdempotencyKey); v.State != triage.StateSucceeded {
		t.Fatalf("ledger %+v", v)
	}
	// Still in the DLQ: the probe says not committed.
	if pr, _ := rt.Prober.(EntryProber).ProbeEntry(context.Background(), &entry.Entry{ID: "job_v"}); pr != ProbeNotCommitted {
		t.Fatalf("job_v probe %v", pr)
	}
}

// TestNexoraProbe reads reviewState: PENDING is not committed; REPLAYED,
// RESOLVED or gone is.
func TestNexoraProbe(t *testing.T) {
	states := map[string]string{"dl-p": "PENDING", "dl-r": "REPLAYED", "dl-s": "RESOLVED"}
	f := newFakeNexora(t, states)
	tg, _ := NewNexoraTarget(f.URL, 0, testCreds)
	for id, want := range map[string]ProbeResult{"dl-p": ProbeNotCommitted, "dl-r": ProbeCommitted, "dl-s": ProbeCommitted, "dl-gone": ProbeCommitted} {
		if pr, d := tg.ProbeEntry(context.Background(), &entry.Entry{ID: id}); pr != want {
			t.Errorf("%s: %v (%s), want %v", id, pr, d, want)
		}
	}
}

// TestCordumFullPageWithoutCursorIsNotTheEnd: the gateway sends
// next_cursor null after a full page whose last entry has no created_at
// (handlers_dlq.go:82-89 at 51b6141): such entries score lowest in
// dlq:index and it cannot page past them. Null was taken for the end of
// the DLQ: the probe answered "gone: committed" for a job still in it past
// that page, recording as done a retry that never happened, and a live
// read stopped there in silence. The probe now cannot tell; the read says
// where it stopped.
func TestCordumFullPageWithoutCursorIsNotTheEnd(t *testing.T) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	var ids []string
	for i := range 502 {
		ids = append(ids, fmt.Sprintf("job_%03d", i))
	}
	f := newFakeCordum(t, ids...)
	for _, id := range ids[498:] { // four entries without created_at
		f.Created[id] = time.Time{}
	}
	tg, err := NewCordumTarget(f.URL, 0, testCreds)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Undated entries come in reverse order of the id: job_501 and job_500
	// fill the first page, job_499 and job_498 are past it.
	if pr, why := tg.ProbeEntry(ctx, &entry.Entry{ID: "job_498"}); pr != ProbeInconclusive {
		t.Errorf("job past the last page the gateway can reach: %v (%s), want inconclusive", pr, why)
	}
	if pr, why := tg.ProbeEntry(ctx, &entry.Entry{ID: "job_000"}); pr != ProbeNotCommitted {
		t.Errorf("job on the page: %v (%s)", pr, why)
	}
	f.Mu.Lock()
	for _, id := range ids[1:4] {
		delete(f.DLQ, id)
	}
	f.Mu.Unlock()
	// 499 left: the page is short, null is the end, and a job not on it
	// is gone.
	if pr, why := tg.ProbeEntry(ctx, &entry.Entry{ID: "job_001"}); pr != ProbeCommitted {
		t.Errorf("deleted job on a DLQ the gateway lists whole: %v (%s)", pr, why)
	}

	f.Mu.Lock()
	for _, id := range ids[1:4] {
		f.DLQ[id] = true
	}
	f.Mu.Unlock()
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var readErr error
	for _, err := range src.Entries(ctx) {
		if err != nil {
			readErr = err
			break
		}
		n++
	}
	if n != 500 || readErr == nil || !strings.Contains(readErr.Error(), "created_at") || !strings.Contains(readErr.Error(), "cordum-redis:") {
		t.Fatalf("read %d entries, then %v; want 500, then an error naming the way round", n, readErr)
	}
}
