package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

type apiBundle struct {
	t      *testing.T
	srv    *Server
	http   *httptest.Server
	store  *bolt.Bolt
	tokens map[string]string // role or user -> secret
	sink   *httptest.Server
	mu     sync.Mutex
	got    map[string]int
	hang   time.Duration
	// noTarget: the router has no default route (set before any request).
	noTarget bool
	sessions map[string]string // token secret -> UI session id (uiSession)
}

// newAPIBundle serves a real server over a real store, OPA and sink, with
// one token per role (users named after roles; "alice" is an approver in
// platform-oncall, "ops-bot" raised the requests).
func newAPIBundle(t *testing.T, entries []string, opts ...func(*Config)) *apiBundle {
	t.Helper()
	dir := t.TempDir()
	b := &apiBundle{t: t, tokens: map[string]string{}, got: map[string]int{}}
	b.sink = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.got[r.Header.Get("Idempotency-Key")]++
		hang := b.hang
		b.mu.Unlock()
		if hang > 0 {
			time.Sleep(hang)
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(b.sink.Close)
	src := filepath.Join(dir, "dlq.jsonl")
	if err := os.WriteFile(src, []byte(strings.Join(entries, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := source.Parse("jsonl:" + src)
	if err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(dir, "replayctl.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b.store = st
	tokens, err := LoadTokens(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct{ user, role string }{{"viewer", RoleViewer}, {"operator", RoleOperator},
		{"approver", RoleApprover}, {"admin", RoleAdmin}, {"alice", RoleApprover}, {"ops-bot", RoleApprover}} {
		secret, err := tokens.Create(u.user, u.role, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		b.tokens[u.user] = secret
	}
	cfg := Config{
		Store: st, Tokens: tokens, Sources: []source.Source{s},
		Approvers: &approval.Config{Expiry: time.Hour, Groups: map[string][]string{"platform-oncall": {"alice", "ops-bot", "admin"}}},
		Engine: func(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
			return policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 0)
		},
		Router: func(rules *triage.Rules) replay.Router {
			if b.noTarget {
				return replay.NewRulesRouter(rules, nil)
			}
			return replay.NewRulesRouter(rules, &replay.Route{Name: "sink", Dispatcher: replay.NewHTTPTarget(b.sink.URL, "", 2*time.Second, nil)})
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.srv = srv
	b.http = httptest.NewUnstartedServer(srv)
	b.http.Config = srv.HTTPServer()
	b.http.Start()
	t.Cleanup(b.http.Close)
	return b
}

func (b *apiBundle) do(method, path, who, body string) (int, string) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.http.URL+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	switch who {
	case "":
	case "bad":
		req.Header.Set("Authorization", "Bearer rpl_not_a_token")
	default:
		req.Header.Set("Authorization", "Bearer "+b.tokens[who])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// reconcile runs one reconcile through the API as ops-bot's operator
// colleague and waits for it.
func (b *apiBundle) reconcile(who string) Run {
	b.t.Helper()
	code, body := b.do("POST", "/api/reconcile", who, "")
	if code != http.StatusAccepted {
		b.t.Fatalf("start run: %d %s", code, body)
	}
	var started struct{ ID string }
	_ = json.Unmarshal([]byte(body), &started)
	for range 500 {
		_, body := b.do("GET", "/api/runs/"+started.ID, who, "")
		var run Run
		_ = json.Unmarshal([]byte(body), &run)
		if run.State != "running" {
			return run
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.t.Fatal("run did not finish")
	return Run{}
}

func line(id, reason string, extra string) string {
	return fmt.Sprintf(`{"id":%q,"topic":"tool.email.send","reason_code":%q,"idempotency_key":"key-%s","payload":{"n":%q}%s}`, id, reason, id, id, extra)
}

func TestAuthorizationMatrix(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	routes := []struct {
		method, path, body string
		need               perm
	}{
		{"GET", "/api/dead-letters", "", permRead},
		{"GET", "/api/dead-letters/nope", "", permRead},
		{"POST", "/api/dead-letters/nope/replay", "", permOperate},
		{"POST", "/api/dead-letters/nope/resolve", `{"reason":"x"}`, permOperate},
		{"POST", "/api/dead-letters/nope/release", "", permOperate},
		{"GET", "/api/plan", "", permRead},
		{"POST", "/api/reconcile", "", permOperate},
		{"GET", "/api/runs/nope", "", permRead},
		{"GET", "/api/approvals", "", permRead},
		{"POST", "/api/approvals/nope/approve", "", permApprove},
		{"POST", "/api/approvals/nope/reject", `{"reason":"x"}`, permApprove},
		{"GET", "/api/audit", "", permRead},
		{"GET", "/api/audit/1", "", permRead},
		{"GET", "/api/audit/verify", "", permRead},
		{"GET", "/api/audit/export", "", permRead},
		{"GET", "/api/snapshots/nope", "", permRead},
		{"GET", "/api/stats", "", permRead},
		{"POST", "/api/policy/backtest", `{"rules":{"name":"rules.yaml","text":"version: v1\n"}}`, permRead},
		{"POST", "/api/dead-letters/replay?preview=true", `{"filter":{"class":["poison"]}}`, permOperate},
		{"GET", "/api/plans/plan_0000000000000000", "", permRead},
		{"POST", "/api/plans/plan_0000000000000000/start", "", permOperate},
		{"POST", "/api/dead-letters/resolve?preview=true", `{"filter":{"class":["poison"]},"reason":"x"}`, permOperate},
	}
	for _, rt := range routes {
		for _, who := range []string{"", "bad", "viewer", "operator", "approver", "admin"} {
			code, body := b.do(rt.method, rt.path, who, rt.body)
			var want string
			switch {
			case who == "" || who == "bad":
				want = "401"
			case !(Token{Role: who}).can(rt.need):
				want = "403"
			}
			got := fmt.Sprint(code)
			switch {
			case want != "" && got != want:
				t.Errorf("%s %s as %q: %d, want %s (%s)", rt.method, rt.path, who, code, want, body)
			case want == "" && (code == 401 || code == 403 || code >= 500):
				t.Errorf("%s %s as %q: %d, want it allowed (%s)", rt.method, rt.path, who, code, body)
			}
			if code >= 400 && !strings.Contains(body, `"code"`) {
				t.Errorf("%s %s as %q: error body is not JSON with a code: %s", rt.method, rt.path, who, body)
			}
		}
	}
	b.srv.Wait()
}

func TestErrorPaths(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("h1", "timeout", `,"labels":{"risk":"high"}`)})
	b.reconcile("operator")

	check := func(name string, code, want int, body string) {
		t.Helper()
		if code != want {
			t.Errorf("%s: %d, want %d (%s)", name, code, want, body)
		}
	}
	code, body := b.do("GET", "/api/nope", "viewer", "")
	check("unknown route", code, 404, body)
	code, body = b.do("GET", "/api/dead-letters/nope", "viewer", "")
	check("unknown entry", code, 404, body)
	code, body = b.do("GET", "/api/audit/99999", "viewer", "")
	check("unknown decision", code, 404, body)
	code, body = b.do("POST", "/api/dead-letters/e1/replay", "operator", "")
	check("replay of a replayed entry", code, 409, body)
	code, body = b.do("POST", "/api/dead-letters/h1/resolve", "operator", `{"reason":"x","extra":true}`)
	check("unknown field", code, 400, body)
	code, body = b.do("POST", "/api/dead-letters/h1/resolve", "operator", `{}`)
	check("missing reason", code, 400, body)
	code, body = b.do("POST", "/api/dead-letters/h1/resolve", "operator", `{"reason":"`+strings.Repeat("x", MaxBody)+`"}`)
	check("too large", code, 413, body)
	code, body = b.do("GET", "/api/dead-letters?state=bogus", "viewer", "")
	check("bad state", code, 400, body)

	// Four-eyes through the API: ops-bot is in the group but raised nothing
	// here (the operator did), alice approves; a second decision conflicts.
	var list []approval.View
	_, body = b.do("GET", "/api/approvals?state=pending", "viewer", "")
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list) != 1 {
		t.Fatalf("approvals %s %v", body, err)
	}
	id := list[0].ID
	// Issue 14: ?state=all returned [] (it matched no record's state).
	for _, q := range []string{"", "?state=all", "?state=ALL", "?state=Pending"} {
		var all []approval.View
		code, body = b.do("GET", "/api/approvals"+q, "viewer", "")
		if err := json.Unmarshal([]byte(body), &all); code != 200 || err != nil || len(all) != 1 || all[0].ID != id {
			t.Fatalf("approvals%s: %d %s, want the one request", q, code, body)
		}
	}
	code, body = b.do("GET", "/api/approvals?state=bogus", "viewer", "")
	check("unknown approval state", code, 400, body)
	code, body = b.do("POST", "/api/approvals/"+id+"/approve", "operator", "")
	check("operator approves", code, 403, body)
	code, body = b.do("POST", "/api/approvals/"+id+"/approve", "approver", "")
	check("approver outside the group", code, 403, body)
	code, body = b.do("POST", "/api/approvals/"+id+"/approve", "alice", "")
	check("alice approves", code, 200, body)
	code, body = b.do("POST", "/api/approvals/"+id+"/reject", "admin", `{"reason":"late"}`)
	check("second decision", code, 409, body)

	// The approved replay runs at the next reconcile, once.
	b.reconcile("operator")
	b.mu.Lock()
	n := b.got["key-h1"]
	b.mu.Unlock()
	if n != 1 {
		t.Fatalf("approved entry delivered %d times", n)
	}
}

func TestRequesterCannotApproveThroughTheAPI(t *testing.T) {
	b := newAPIBundle(t, []string{line("h1", "timeout", `,"labels":{"risk":"high"}`)})
	// ops-bot's token has the approver role; runs started by it are raised by it.
	if _, err := b.srv.runs.start("api", "ops-bot"); err != nil {
		t.Fatal(err)
	}
	b.srv.Wait()
	var list []approval.View
	_, body := b.do("GET", "/api/approvals", "viewer", "")
	_ = json.Unmarshal([]byte(body), &list)
	if len(list) != 1 {
		t.Fatalf("approvals: %s", body)
	}
	code, body := b.do("POST", "/api/approvals/"+list[0].ID+"/approve", "ops-bot", "")
	if code != http.StatusForbidden || !strings.Contains(body, "four-eyes") {
		t.Fatalf("requester approving: %d %s", code, body)
	}
}

func TestOnlyOneRunAtATime(t *testing.T) {
	var entries []string
	for i := range 20 {
		entries = append(entries, line(fmt.Sprintf("e%02d", i), "timeout", ""))
	}
	b := newAPIBundle(t, entries)
	b.hang = 20 * time.Millisecond
	code, body := b.do("POST", "/api/reconcile", "operator", "")
	if code != http.StatusAccepted {
		t.Fatalf("%d %s", code, body)
	}
	code, body = b.do("POST", "/api/reconcile", "admin", "")
	if code != http.StatusConflict {
		t.Fatalf("second run while one is going: %d %s", code, body)
	}
	b.srv.Wait()
}

func TestShutdownDuringARunLosesNothing(t *testing.T) {
	var entries []string
	for i := range 60 {
		entries = append(entries, line(fmt.Sprintf("e%02d", i), "timeout", ""))
	}
	b := newAPIBundle(t, entries)
	b.hang = 30 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	b.srv.SetBase(ctx)
	if _, err := b.srv.runs.start("api", "operator"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let dispatches be in flight
	cancel()                           // SIGTERM
	b.srv.Wait()

	// Every key the sink received is known to the ledger as succeeded or
	// outcome_unknown: no dispatch was lost, none left dispatching.
	b.mu.Lock()
	got := map[string]int{}
	for k, n := range b.got {
		got[k] = n
	}
	b.mu.Unlock()
	states := map[idempotency.State]int{}
	_ = b.store.LedgerRecords(context.Background(), func(r *idempotency.Record) error {
		states[r.State]++
		if got[r.Key] > 0 && r.State != idempotency.Succeeded && r.State != idempotency.OutcomeUnknown {
			t.Errorf("key %s reached the target but the ledger says %s", r.Key, r.State)
		}
		return nil
	})
	if states[idempotency.Dispatching] != 0 {
		t.Fatalf("%d dispatches left without an outcome", states[idempotency.Dispatching])
	}
	if len(got) == len(entries) {
		t.Fatal("the run finished before the shutdown: the test proved nothing")
	}
	// A new run finishes the job without sending any key twice.
	b.srv.SetBase(context.Background())
	b.reconcile("operator")
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, n := range b.got {
		if n > 1 {
			t.Errorf("key %s delivered %d times", k, n)
		}
	}
	t.Logf("delivered before shutdown: %d of %d; ledger at shutdown: %v", len(got), len(entries), states)
}

func TestMetricsExposeTheDLQ(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("p1", "schema_invalid", "")})
	b.reconcile("operator")
	// The run's record says it finished (runner.execute: FinishAs) a
	// moment before its counters move: seen once in make test, so scrape
	// until the run is counted (at most 5s).
	var data []byte
	for deadline := time.Now().Add(5 * time.Second); ; {
		resp, err := http.Get(b.http.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		data, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(data), `replayctl_reconcile_runs_total{result="succeeded"} 1`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, want := range []string{
		`replayctl_entries{action="quarantine",class="poison",state="quarantined"} 1`,
		`replayctl_replay_outcomes_total{outcome="succeeded"} 1`,
		`replayctl_entries_ingested_total 2`,
		`replayctl_decisions_total{action="auto_replay"} 1`,
		`replayctl_reconcile_runs_total{result="succeeded"} 1`,
		`replayctl_policy_eval_seconds_count`,
		`replayctl_reconcile_last_success_timestamp_seconds`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestBulkThroughTheAPI(t *testing.T) {
	var entries []string
	for i := range 30 {
		entries = append(entries, line(fmt.Sprintf("p%02d", i), "schema_invalid", ""))
	}
	entries = append(entries, line("e1", "timeout", ""))
	b := newAPIBundle(t, entries)
	b.reconcile("operator")

	code, body := b.do("POST", "/api/dead-letters/replay?preview=true", "operator", `{"filter":{"class":["transient","poison"]}}`)
	var preview struct {
		Matched, Would int
		Why            map[string]int `json:"would_not_by_reason"`
	}
	if err := json.Unmarshal([]byte(body), &preview); err != nil || code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if preview.Matched != 31 || preview.Would != 0 || preview.Why["quarantined"] != 30 || preview.Why["already committed"] != 1 {
		t.Fatalf("preview %+v", preview)
	}
	code, body = b.do("POST", "/api/dead-letters/resolve", "operator", `{"filter":{"class":["poison"]}}`)
	if code != http.StatusBadRequest {
		t.Fatalf("resolve without reason: %d %s", code, body)
	}
	code, body = b.do("POST", "/api/dead-letters/replay", "operator", `{"filter":{"topic":["[bad"]}}`)
	if code != http.StatusBadRequest {
		t.Fatalf("bad glob: %d %s", code, body)
	}
	// The mass-resolve typo (issue 17): an empty filter matches everything,
	// so it is refused unless "all" says so; "reason" inside the filter is
	// not the reason-code filter (that is reason_code) and is refused too.
	for _, req := range []string{`{"filter":{},"reason":"x"}`, `{"reason":"x"}`, `{"filter":{"reason":["timeout"]},"reason":"x"}`,
		`{"filter":{"all":true,"class":["poison"]},"reason":"x"}`} {
		if code, body = b.do("POST", "/api/dead-letters/resolve", "operator", req); code != http.StatusBadRequest {
			t.Fatalf("resolve %s: %d %s", req, code, body)
		}
	}
	_, body = b.do("GET", "/api/dead-letters?state=resolved&size=100", "viewer", "")
	if !strings.Contains(body, `"total":0`) {
		t.Fatalf("a refused bulk resolve resolved entries: %s", body)
	}
	code, body = b.do("POST", "/api/dead-letters/resolve?preview=true", "operator", `{"filter":{"all":true},"reason":"x"}`)
	if code != http.StatusOK || !strings.Contains(body, `"matched":31`) {
		t.Fatalf("resolve all preview: %d %s", code, body)
	}
	code, body = b.do("POST", "/api/dead-letters/replay?preview=true", "operator", `{"filter":{"reason_code":["timeout"]}}`)
	if code != http.StatusOK || !strings.Contains(body, `"matched":1,`) {
		t.Fatalf("reason_code filter: %d %s", code, body)
	}
	code, body = b.do("POST", "/api/dead-letters/resolve", "operator", `{"filter":{"class":["poison"]},"reason":"adapter fixed"}`)
	if code != http.StatusAccepted {
		t.Fatalf("bulk resolve: %d %s", code, body)
	}
	b.srv.Wait()
	var started struct{ ID string }
	_ = json.Unmarshal([]byte(body), &started)
	_, body = b.do("GET", "/api/runs/"+started.ID, "viewer", "")
	var run Run
	if err := json.Unmarshal([]byte(body), &run); err != nil || run.Bulk == nil || run.Bulk.Would != 30 || run.State != "succeeded" {
		t.Fatalf("run %s", body)
	}
	_, body = b.do("GET", "/api/dead-letters?state=resolved&size=100", "viewer", "")
	var page replay.Page
	_ = json.Unmarshal([]byte(body), &page)
	if page.Total != 30 {
		t.Fatalf("resolved %d", page.Total)
	}
}
