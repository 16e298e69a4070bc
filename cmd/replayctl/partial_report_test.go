package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// stoppingGateway answers its first DLQ page with one transient entry and a
// next cursor, and every later page with 400, as a Cordum gateway
// restarted mid-read answers a cursor it no longer knows (the page shape:
// cordum-io/cordum core/controlplane/gateway handlers_dlq.go
// handleListDLQPage, {"items", "next_cursor"}).
func stoppingGateway(t *testing.T) *httptest.Server {
	t.Helper()
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("cursor") != "" {
			http.Error(w, `{"error":"invalid cursor"}`, http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `{"items":[{"job_id":"job_p1","topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason":"smtp relay timed out","reason_code":"timeout","attempts":1,"created_at":"2026-11-20T10:00:00Z"}],"next_cursor":"c2"}`)
	}))
	t.Cleanup(gw.Close)
	return gw
}

// TestReconcileStoppedByASourceSaysWhatItDid: a reconcile whose source fails
// after some entries were read and replayed exits 1 with the error, and
// still prints what it did before it stopped. It printed only the error:
// with a RabbitMQ broker killed mid-run, 511 delivered replays and 5
// unknown outcomes went unreported on the console.
func TestReconcileStoppedByASourceSaysWhatItDid(t *testing.T) {
	var sent atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer target.Close()
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			sent.Store(0)
			gw := stoppingGateway(t)
			var out, errb bytes.Buffer
			code := run([]string{"reconcile", "--source", "cordum:" + gw.URL, "--rules", "../../rules.yaml", "--policies", "../../policies",
				"--db", t.TempDir() + "/s.db", "--target", target.URL, "-o", format}, strings.NewReader(""), &out, &errb)
			if code != exitError {
				t.Fatalf("exit %d, want %d: %s", code, exitError, errb.String())
			}
			if sent.Load() != 1 {
				t.Fatalf("the target got %d replays, want the first page's 1", sent.Load())
			}
			if !strings.Contains(errb.String(), "400") {
				t.Errorf("stderr does not give the source's error: %q", errb.String())
			}
			if format == "json" {
				var rep struct {
					Replays struct {
						Succeeded int `json:"succeeded"`
					} `json:"replays"`
				}
				if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Replays.Succeeded != 1 {
					t.Fatalf("json report %+v (%v): %s", rep, err, out.String())
				}
				return
			}
			if o := out.String(); !strings.Contains(o, "run stopped early") || !strings.Contains(o, "replays: 1 dispatched, 1 succeeded") {
				t.Errorf("stdout does not say what the run did before it stopped:\n%s", o)
			}
		})
	}
}
