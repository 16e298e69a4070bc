package main

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// reconcile --push-url sends the run's metrics to a Pushgateway. The fake
// gateway answers as the real one does (PUT /metrics/job/<job> -> 200) and
// decodes the body with the same expfmt decoder the gateway uses.
func TestReconcilePushesToPushgateway(t *testing.T) {
	var mu sync.Mutex
	var method, path string
	fams := map[string]*dto.MetricFamily{}
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		method, path = r.Method, r.URL.Path
		dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
		for {
			var mf dto.MetricFamily
			if err := dec.Decode(&mf); err != nil {
				if !errors.Is(err, io.EOF) {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				break
			}
			fams[mf.GetName()] = &mf
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer gw.Close()
	dir := t.TempDir()
	dlq := filepath.Join(dir, "dlq.jsonl")
	if err := os.WriteFile(dlq, []byte(`{"id":"p1","reason_code":"schema_invalid","payload":{}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"reconcile", "--rules", "../../rules.yaml", "--policies", "../../policies", "--db", filepath.Join(dir, "r.db"),
		"--source", "jsonl:" + dlq, "--push-url", gw.URL}, nil, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if method != http.MethodPut || path != "/metrics/job/replayctl_reconcile" {
		t.Fatalf("pushed %s %s, want PUT /metrics/job/replayctl_reconcile", method, path)
	}
	ing := fams["replayctl_entries_ingested_total"]
	if ing == nil || ing.GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Fatalf("pushed ingested counter %v", ing)
	}
	if fams["replayctl_reconcile_runs_total"] == nil || fams["replayctl_build_info"] == nil {
		t.Fatalf("pushed families lack runs_total or build_info: %d families", len(fams))
	}
	if fams["go_goroutines"] != nil {
		t.Fatal("pushed Go runtime metrics")
	}

	// An unreachable gateway is an error naming it, after the run is done.
	gw.Close()
	errb.Reset()
	if code := run([]string{"reconcile", "--rules", "../../rules.yaml", "--policies", "../../policies", "--db", filepath.Join(dir, "r.db"),
		"--source", "jsonl:" + dlq, "--push-url", gw.URL}, nil, &out, &errb); code != exitError || !bytes.Contains(errb.Bytes(), []byte(gw.URL)) {
		t.Fatalf("unreachable gateway: exit %d, %q", code, errb.String())
	}
}
