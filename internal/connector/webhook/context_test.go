package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
)

// itemContext stands in for registry.ReplayContext: what an exec target
// is told about a Prodigy item (issue 27: it got REPLAY_ENTRY_ID=item_0
// alone, and item ids repeat across jobs, iepathos/prodigy
// src/cook/execution/mapreduce executor.rs:778 at 480b22a4).
func itemContext(e *entry.Entry) map[string]string {
	return map[string]string{"entry_ref": e.Ref(), "job_id": e.Scope, "item_path": e.Origin, "repo": "my\x00repo"}
}

// TestExecTargetNamesTheEntry: the entry's context reaches the command in
// REPLAY_<KEY> (overriding an inherited one, NUL percent-encoded and said
// so) and, with stdin: entry, in a JSON envelope holding the payload; the
// sanitised environment still keeps replayctl's own secrets out.
func TestExecTargetNamesTheEntry(t *testing.T) {
	t.Setenv("REPLAY_JOB_ID", "inherited")
	t.Setenv("CORDUM_API_KEY", "ck-must-not-leak")
	dir := t.TempDir()
	e := &entry.Entry{ID: "item_0", Source: "prodigy", Scope: "mapreduce-2", Origin: "/h/.prodigy/dlq/r/mapreduce-2/items/item_0.json",
		Payload: []byte(`{"file":"a.rs"}`)}
	for _, tc := range []struct {
		stdin   string
		payload []byte
		want    string // stdin as the command read it
	}{
		{"", e.Payload, `{"file":"a.rs"}`},
		{"entry", e.Payload, `"payload":{"file":"a.rs"}`},
		{"entry", []byte("not json\x01"), `"payload":"not json\u0001"`},
	} {
		out := filepath.Join(dir, "out")
		x := &ExecTarget{Command: []string{"/bin/sh", "-c", `env > "$0.env"; cat > "$0.stdin"`, out}, Timeout: 10 * time.Second,
			Stdin: tc.stdin, Context: itemContext}
		ee := *e
		ee.Payload = tc.payload
		if res := x.Dispatch(context.Background(), connector.Request{Entry: &ee, Key: "k-1", Attempt: 2}); res.Outcome != connector.Succeeded {
			t.Fatalf("stdin %q: %s (%s)", tc.stdin, res.Outcome, res.Detail)
		}
		env, err := os.ReadFile(out + ".env")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"REPLAY_JOB_ID=mapreduce-2\n", "REPLAY_ITEM_PATH=" + e.Origin + "\n", "REPLAY_REPO=my%00repo\n",
			"REPLAY_ENCODING=percent\n", "REPLAY_ENTRY_ID=item_0\n", "REPLAY_ENTRY_REF=prodigy:mapreduce-2/item_0\n"} {
			if !strings.Contains(string(env), want) {
				t.Errorf("stdin %q: environment lacks %q:\n%s", tc.stdin, want, env)
			}
		}
		if strings.Contains(string(env), "inherited") || strings.Contains(string(env), "ck-must-not-leak") {
			t.Errorf("stdin %q: environment keeps an inherited value:\n%s", tc.stdin, env)
		}
		in, err := os.ReadFile(out + ".stdin")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(in), tc.want) {
			t.Errorf("stdin %q: read %s, want %s in it", tc.stdin, in, tc.want)
		}
		if tc.stdin == "entry" {
			var env struct {
				EntryID string            `json:"entry_id"`
				Entry   map[string]string `json:"entry"`
				Key     string            `json:"idempotency_key"`
				Attempt int               `json:"attempt"`
			}
			if err := json.Unmarshal(in, &env); err != nil || env.EntryID != "item_0" || env.Entry["job_id"] != "mapreduce-2" ||
				env.Key != "k-1" || env.Attempt != 2 {
				t.Errorf("envelope %s: %+v %v", in, env, err)
			}
		}
	}
}

// TestHTTPTargetStampsTheLineage: every replay carries the lineage
// (entry.LineageLabel: the entry's own, else its ref) and the replay's
// number, so a message that fails again and comes back is linked to the
// entry it came from.
func TestHTTPTargetStampsTheLineage(t *testing.T) {
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Clone())
	}))
	defer srv.Close()
	h := NewHTTPTarget(srv.URL, "", 5*time.Second, nil)
	for _, e := range []*entry.Entry{
		{ID: "m-1", Source: "jsonl", Payload: []byte(`{}`)},
		{ID: "m-2", Source: "jsonl", Payload: []byte(`{}`), Labels: map[string]string{entry.LineageLabel: "jsonl:m-0"}},
	} {
		if res := h.Dispatch(context.Background(), connector.Request{Entry: e, Key: "k-" + e.ID, Attempt: 3}); res.Outcome != connector.Succeeded {
			t.Fatalf("%s: %s (%s)", e.ID, res.Outcome, res.Detail)
		}
	}
	if len(got) != 2 || got[0].Get(entry.LineageLabel) != "jsonl:m-1" || got[1].Get(entry.LineageLabel) != "jsonl:m-0" ||
		got[0].Get(entry.ReplayCountLabel) != "3" {
		t.Errorf("lineage headers: %v", got)
	}
}
