package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestPlanTellsOfLiveSourceRetries: a live source that answers 503 is
// retried, and the command says so on stderr as it goes (a gateway that is
// down kept plan and reconcile silent for a minute, like a hung command).
// The gateway answers as Cordum's does (cordum-io/cordum core/controlplane/
// gateway handlers_dlq.go handleListDLQPage: {"items", "next_cursor": null}).
func TestPlanTellsOfLiveSourceRetries(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			http.Error(w, `{"error":"failed to list dlq entries"}`, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"items":[{"job_id":"job_r1","topic":"tool.email.send","status":"JOB_STATUS_FAILED","reason":"pool email overloaded","reason_code":"pool_overloaded","attempts":3,"created_at":"2026-11-20T10:00:00Z"}],"next_cursor":null}`)
	}))
	defer gw.Close()
	var out, errb bytes.Buffer
	code := run([]string{"plan", "--source", "cordum:" + gw.URL, "--rules", "../../rules.yaml", "--policies", "../../policies",
		"--db", t.TempDir() + "/none.db"}, strings.NewReader(""), &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "job_r1") {
		t.Errorf("plan: %s", out.String())
	}
	if e := errb.String(); !strings.Contains(e, "retrying") || !strings.Contains(e, gw.URL+"/api/v1/dlq/page") {
		t.Errorf("stderr does not tell of the retry: %q", e)
	}
}
