package server

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/backtest"
	"github.com/replayctl/replayctl/internal/triage"
)

// POST /api/policy/backtest re-decides the recorded decisions with the
// candidate in the body, writes nothing, and refuses a candidate that does
// not load with its problems.
func TestServerBacktest(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("h1", "timeout", `,"labels":{"risk":"high"}`),
		line("g1", "policy_denied", "")})
	b.reconcile("operator")
	rules, err := os.ReadFile("../../rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Looser: a policy that keeps every proposal, so the high-risk label
	// no longer asks for a person.
	loose := `package replayctl
decision := {"action": input.proposed_action, "reasons": ["keep the proposal"]}
`
	req, _ := json.Marshal(BacktestRequest{Rules: triage.SourceFile{Name: "rules.yaml", Text: string(rules)},
		Policies: []triage.SourceFile{{Name: "loose.rego", Text: loose}}})
	_, before := b.do("GET", "/api/audit/verify", "viewer", "")
	code, body := b.do("POST", "/api/policy/backtest", "viewer", string(req))
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var rep backtest.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Decisions != 3 || rep.Changed != 1 || rep.NowAutoReplay != 1 || len(rep.AutoReplays) != 1 || rep.AutoReplays[0].EntryRef != "jsonl:h1" {
		t.Fatalf("report %s", body)
	}
	if _, after := b.do("GET", "/api/audit/verify", "viewer", ""); after != before {
		t.Fatalf("the backtest wrote to the chain:\n%s\n%s", before, after)
	}

	bad, _ := json.Marshal(BacktestRequest{Rules: triage.SourceFile{Name: "rules.yaml", Text: "version: v2\n"}})
	if code, body := b.do("POST", "/api/policy/backtest", "viewer", string(bad)); code != 422 || !strings.Contains(body, "version") {
		t.Fatalf("bad candidate: %d %s", code, body)
	}
	if code, body := b.do("POST", "/api/policy/backtest", "viewer", `{}`); code != 400 {
		t.Fatalf("no candidate: %d %s", code, body)
	}
	// One at a time.
	b.srv.backtesting.Store(true)
	if code, body := b.do("POST", "/api/policy/backtest", "viewer", string(req)); code != 409 {
		t.Fatalf("second backtest at once: %d %s", code, body)
	}
	b.srv.backtesting.Store(false)
}

// Issue 32: the console backtests a candidate the server is configured
// with (by name: a client never names a path), and can re-decide what the
// server's sources hold now against today's rules instead of the recorded
// decisions.
func TestServerBacktestCandidateAndSources(t *testing.T) {
	dir := t.TempDir()
	loose := `package replayctl
decision := {"action": input.proposed_action, "reasons": ["keep the proposal"]}
`
	if err := os.WriteFile(dir+"/loose.rego", []byte(loose), 0o644); err != nil {
		t.Fatal(err)
	}
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("h1", "timeout", `,"labels":{"risk":"high"}`),
		line("g1", "policy_denied", "")}, func(c *Config) {
		c.BacktestCandidates = []BacktestCandidate{{Name: "loose", Rules: "../../rules.yaml", Policies: dir}}
	})
	b.reconcile("operator")
	post := func(req BacktestRequest) (int, string, *backtest.Report) {
		t.Helper()
		body, _ := json.Marshal(req)
		code, out := b.do("POST", "/api/policy/backtest", "viewer", string(body))
		var rep backtest.Report
		if code == 200 {
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
		}
		return code, out, &rep
	}
	code, body, rep := post(BacktestRequest{Candidate: "loose"})
	if code != 200 || rep.Decisions != 3 || rep.Changed != 1 || rep.NowAutoReplay != 1 || rep.AutoReplays[0].EntryRef != "jsonl:h1" {
		t.Fatalf("configured candidate: %d %s", code, body)
	}
	src := b.srv.cfg.Sources[0].String()
	code, body, rep = post(BacktestRequest{Candidate: "loose", Sources: []string{src}})
	// Read now: e1 was replayed, so today's rules skip it and so does the
	// candidate; h1 still asks a person today and not with the candidate.
	if code != 200 || rep.Decisions != 3 || rep.Changed != 1 || rep.NowAutoReplay != 1 || rep.AutoReplays[0].Decision != 0 {
		t.Fatalf("from the sources: %d %s", code, body)
	}
	for name, req := range map[string]BacktestRequest{
		"unknown candidate": {Candidate: "../../etc/passwd"},
		"unknown source":    {Candidate: "loose", Sources: []string{"jsonl:/etc/passwd"}},
		"text and name":     {Candidate: "loose", Rules: triage.SourceFile{Name: "rules.yaml", Text: "version: v1\n"}},
	} {
		if code, body, _ := post(req); code != 400 {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
}
