package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// TestRemoteApproveReplayNowByApprover: an approver's `approvals approve
// --replay-now` through a server records the approval, then the replay is
// refused (replaying takes an operator). The command said only "role
// approver may not do this", so the approver took the approval for refused
// too; now it prints the approval, as the local command does, and the
// refusal names the request and the roles that may make it.
func TestRemoteApproveReplayNowByApprover(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "replayctl.db")
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
	defer sink.Close()
	src := "jsonl:../../testdata/jsonl/entries.jsonl"
	if _, code := runCLI(t, "reconcile", "--source", src, "--target", sink.URL, "--as", "ops-bot",
		"--rules", "../../rules.yaml", "--policies", "../../policies", "--db", db); code != exitOK {
		t.Fatalf("reconcile exit %d", code)
	}
	out, code := runCLI(t, "approvals", "list", "--db", db, "-o", "json")
	if code != exitOK {
		t.Fatalf("approvals list exit %d", code)
	}
	var reqs []struct {
		ID       string `json:"id"`
		EntryRef string `json:"entry_ref"`
	}
	if err := json.Unmarshal([]byte(out), &reqs); err != nil || len(reqs) == 0 {
		t.Fatalf("approvals: %v %s", err, out)
	}
	var id string
	for _, r := range reqs {
		if r.EntryRef == "jsonl:evt-0002" {
			id = r.ID
		}
	}
	if id == "" {
		t.Fatalf("no request for evt-0002 in %s", out)
	}

	st, err := bolt.Open(db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tokens, err := server.LoadTokens(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := tokens.Create("alice", server.RoleApprover, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, err := source.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: st, Tokens: tokens, Sources: []source.Source{s},
		Approvers: &approval.Config{Expiry: approval.DefaultExpiry, Groups: map[string][]string{"payments-oncall": {"alice"}}},
		Engine: func(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
			return policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 0)
		},
		Router: func(r *triage.Rules) replay.Router { return replay.NewRulesRouter(r, nil) }})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()

	var stdout, stderr bytes.Buffer
	code = run([]string{"approvals", "approve", id, "--replay-now", "--server", hs.URL, "--token", secret},
		strings.NewReader(""), &stdout, &stderr)
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	if !strings.Contains(stdout.String(), id+" approved by alice") {
		t.Errorf("stdout does not say the approval was recorded: %q", stdout.String())
	}
	if e := stderr.String(); !strings.Contains(e, "/replay") || !strings.Contains(e, "operator or admin") {
		t.Errorf("refusal does not say what was refused and who may: %q", e)
	}
}
