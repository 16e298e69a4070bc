package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
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

func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	if errb.Len() > 0 {
		t.Logf("replayctl %s: stderr: %s", strings.Join(args, " "), errb.String())
	}
	return out.String(), code
}

// TestServerModeMatchesLocalMode runs the same read commands against the
// state file and against a server over that file: same output.
func TestServerModeMatchesLocalMode(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "replayctl.db")
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
	defer sink.Close()
	src := "cordum:../../testdata/cordum/dlq.jsonl"
	common := []string{"--rules", "../../rules.yaml", "--policies", "../../policies", "--db", db}
	if _, code := runCLI(t, append([]string{"reconcile", "--source", src, "--target", sink.URL, "--as", "ops-bot"}, common...)...); code != exitOK {
		t.Fatalf("reconcile exit %d", code)
	}
	commands := [][]string{
		{"dlq", "list"},
		{"dlq", "list", "--state", "ALL", "--size", "5", "--page", "1"},
		{"dlq", "list", "--state", "quarantined", "-o", "json"},
		{"approvals", "list"},
		{"approvals", "list", "--state", "pending", "-o", "json"},
		{"dlq", "show", "cordum:job_81a8", "-o", "json"},
		{"stats", "-o", "json"},
	}
	local := make([]string, len(commands))
	for i, c := range commands {
		out, code := runCLI(t, append(c, "--db", db)...)
		if code != 0 {
			t.Fatalf("%v: exit %d", c, code)
		}
		local[i] = out
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
	secret, err := tokens.Create("vic", server.RoleViewer, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, err := source.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	// The stats' growth uses "now"; pin both sides to the same day.
	srv, err := server.New(server.Config{Store: st, Tokens: tokens, Sources: []source.Source{s},
		Approvers: &approval.Config{Expiry: approval.DefaultExpiry},
		Engine: func(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
			return policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", 0)
		},
		Router: func(r *triage.Rules) replay.Router { return replay.NewRulesRouter(r, nil) }})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	for i, c := range commands {
		out, code := runCLI(t, append(c, "--server", hs.URL, "--token", secret)...)
		if code != 0 {
			t.Fatalf("%v --server: exit %d", c, code)
		}
		if ageless(out) != ageless(local[i]) {
			t.Errorf("%v differs between local and --server mode\nlocal:\n%s\nserver:\n%s", c, local[i], out)
		}
	}
	// Without a token the server refuses, with a clear message and exit 1.
	if _, code := runCLI(t, "dlq", "list", "--server", hs.URL, "--token", ""); code != exitError {
		t.Fatalf("no token: exit %d", code)
	}
	os.Unsetenv("REPLAYCTL_SERVER")
}

// durationField is an age as the tables print it: "0s", "1s", "2m3s", "1.5ms", "3d".
var durationField = regexp.MustCompile(`^(\d+(\.\d+)?(ns|µs|us|ms|s|m|h|d))+$`)

// ageless blanks what legitimately moves between two reads a moment apart
// (an approval's age, "now"-relative figures).
func ageless(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, `"age"`) || strings.Contains(line, `"growth_per_day_7d"`) {
			continue
		}
		fields := strings.Fields(line)
		for i, f := range fields {
			if durationField.MatchString(f) {
				fields[i] = "AGE"
			}
		}
		b.WriteString(strings.Join(fields, " "))
		b.WriteByte('\n')
	}
	return b.String()
}

// A streamed answer (audit export) maps a refusal as every other remote
// call does: 422 (the server could not process what was asked) is a usage
// error, exit 2, with the server's own message; stream used to have its
// own copy of the mapping, without the 422 case.
func TestRemoteStreamMapsRefusalsAsCallDoes(t *testing.T) {
	for _, c := range []struct {
		status int
		want   int
	}{{http.StatusUnprocessableEntity, exitUsage}, {http.StatusNotFound, exitUsage}, {http.StatusBadRequest, exitUsage},
		{http.StatusForbidden, exitError}, {http.StatusConflict, exitError}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			w.Write([]byte(`{"error":{"code":"x","message":"refused for a reason"}}`))
		}))
		f := &remoteFlags{url: srv.URL}
		for name, err := range map[string]error{
			"stream": f.stream(context.Background(), "/api/audit/export", &bytes.Buffer{}),
			"call":   f.call(context.Background(), "GET", "/api/stats", nil, nil, nil),
		} {
			var ee *exitErr
			if !errors.As(err, &ee) || ee.code != c.want || err.Error() != "refused for a reason" {
				t.Errorf("%s, HTTP %d: %v, want exit %d with the server's message", name, c.status, err, c.want)
			}
		}
		srv.Close()
	}
}
