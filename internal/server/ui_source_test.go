package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
)

// fakeCordumGateway answers as cordum-io/cordum's gateway does for what
// the entry page links to: GET /api/v1/dlq/page lists entries by job_id
// (core/controlplane/gateway/handlers_dlq.go:46 handleListDLQPage, items
// and next_cursor); GET /api/v1/jobs/{id} is the job (gateway.go route
// table, "4. Job Details", handleGetJob); /api/v1/dlq/{job_id} takes
// only DELETE and POST .../retry (gateway.go "10. DLQ"; handlers_dlq.go
// handleDeleteDLQ, handleRetryDLQ), so a GET there is 405.
func fakeCordumGateway(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/dlq/page", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"items":[{"job_id":"job-7/a b","topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason":"pool overloaded","reason_code":"pool_overloaded","attempts":3,"created_at":"2026-11-20T10:00:00Z"}],"next_cursor":null}`)
	})
	mux.HandleFunc("GET /api/v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"id":%q,"state":"FAILED"}`, r.PathValue("id"))
	})
	mux.HandleFunc("DELETE /api/v1/dlq/{job_id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("POST /api/v1/dlq/{job_id}/retry", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"job_id":"x"}`) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// fakeNexoraObserve answers as iamvirul/nexora's observability server
// does (nexora-cli ObserveCommand.java at 003de5ba): GET /api/dead-letters
// ?state=&page=&size= lists (line 232, {"items","page","size"});
// /api/dead-letters/{id} takes POST .../replay and .../resolve only and
// answers anything else 405 (lines 174-229): there is no GET of one.
func fakeNexoraObserve(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/dead-letters" && r.Method == http.MethodGet:
			if r.URL.Query().Get("page") != "0" {
				fmt.Fprint(w, `{"items":[],"page":1,"size":100}`)
				return
			}
			fmt.Fprint(w, `{"items":[{"id":"dl-42","executionId":"exec-9","goal":"sync crm","context":{"topic":"tool.crm.sync"},"failureCode":"STEP_FAILED","failureMessage":"timed out","failedAt":"2026-11-20T12:00:00Z","reviewState":"PENDING"}],"page":0,"size":100}`)
		case strings.HasPrefix(r.URL.Path, "/api/dead-letters/") && r.Method == http.MethodPost:
			fmt.Fprint(w, `{"accepted":true}`)
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
			fmt.Fprint(w, `{"error":"Method Not Allowed"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// readOne reads the first entry of a --source spec, as reconcile does.
func readOne(t *testing.T, spec string) entry.Entry {
	t.Helper()
	src, err := source.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	for e, err := range src.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	t.Fatalf("%s yielded nothing", spec)
	return entry.Entry{}
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSourceRefLinksToTheSystem: an entry read from a live gateway names
// the system's own id and links to a GET the system answers about it
// (Cordum: the job; Nexora: the dead-letter page it was listed on, which
// holds it); the dead-letter path Cordum acts on is shown, not linked (a
// GET there is 405). A Prodigy entry names its item and job and shows its
// DLQ item file; an entry from a file has no link.
func TestSourceRefLinksToTheSystem(t *testing.T) {
	cordum := fakeCordumGateway(t)
	e := readOne(t, "cordum:"+cordum.URL+"/")
	ref := sourceRefOf(&e)
	if ref.System != "Cordum" || ref.IDName != "job_id" || ref.ID != "job-7/a b" {
		t.Fatalf("cordum ref: %+v", ref)
	}
	if want := cordum.URL + "/api/v1/jobs/job-7%2Fa%20b"; ref.Link != want {
		t.Fatalf("cordum link %q, want %q", ref.Link, want)
	}
	if code, body := get(t, ref.Link); code != 200 || !strings.Contains(body, `"job-7/a b"`) {
		t.Fatalf("GET %s: %d %s", ref.Link, code, body)
	}
	if ref.Path != cordum.URL+"/api/v1/dlq/job-7%2Fa%20b" {
		t.Fatalf("cordum dead-letter path %q", ref.Path)
	}
	if code, _ := get(t, ref.Path); code != http.StatusMethodNotAllowed {
		t.Fatalf("the fake answers GET on the dead-letter path %d: it no longer behaves as the gateway", code)
	}

	nexora := fakeNexoraObserve(t)
	e = readOne(t, "nexora:"+nexora.URL)
	ref = sourceRefOf(&e)
	if ref.System != "Nexora" || ref.ID != "dl-42" || ref.Extra["execution id"] != "exec-9" {
		t.Fatalf("nexora ref: %+v", ref)
	}
	if !strings.HasPrefix(ref.Link, nexora.URL+"/api/dead-letters?") {
		t.Fatalf("nexora link %q", ref.Link)
	}
	if code, body := get(t, ref.Link); code != 200 || !strings.Contains(body, `"id":"dl-42"`) {
		t.Fatalf("GET %s: %d %s", ref.Link, code, body)
	}

	// Prodigy: one file per item under the job's DLQ directory
	// (iepathos/prodigy src/cook/execution/dlq.rs:536), laid out as
	// internal/source's Prodigy tests write it.
	root := t.TempDir()
	dir := filepath.Join(root, "job-3", "mapreduce", "dlq", "job-3", "items")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	item := filepath.Join(dir, "item-1.json")
	if err := os.WriteFile(item, []byte(`{"item_id":"item-1","item_data":{"n":1},"failure_count":2,"failure_history":[{"attempt_number":1,"error_type":"Timeout","error_message":"timed out"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e = readOne(t, "prodigy:"+root)
	ref = sourceRefOf(&e)
	if ref.System != "Prodigy" || ref.IDName != "item_id" || ref.ID != "item-1" || ref.Link != "" || ref.Extra["job"] != "job-3" {
		t.Fatalf("prodigy ref: %+v", ref)
	}
	if abs, _ := filepath.Abs(item); ref.Path != abs && ref.Path != item {
		t.Fatalf("prodigy item path %q, want %q", ref.Path, item)
	}

	// A Cordum export read from a file: the id, no link.
	f := filepath.Join(t.TempDir(), "dlq.jsonl")
	if err := os.WriteFile(f, []byte(`{"job_id":"job-1","topic":"t","reason_code":"x","attempts":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e = readOne(t, "cordum:"+f)
	if ref = sourceRefOf(&e); ref.ID != "job-1" || ref.Link != "" || ref.Path != "" {
		t.Fatalf("cordum file ref: %+v", ref)
	}
	// Undecodable: a file's record is named where it was; a live one by its
	// own id, where it was in Path.
	bad := entry.Entry{ID: f + ":1", Origin: f + ":1", Source: "cordum", DecodeError: "x"}
	if ref = sourceRefOf(&bad); ref.IDName != "where" || ref.Path != f+":1" {
		t.Fatalf("undecodable file record ref: %+v", ref)
	}
	bad = entry.Entry{ID: "job_bad", Origin: "http://gw/api/v1/dlq/page?limit=500#2", Source: "cordum", DecodeError: "x"}
	if ref = sourceRefOf(&bad); ref.IDName == "where" || ref.ID != "job_bad" || ref.Path != bad.Origin {
		t.Fatalf("undecodable live record ref: %+v", ref)
	}
}
