package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// syncBuffer is a bytes.Buffer that serve's goroutines and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve on PostgreSQL hands the store's own sealer loop to its audit-sealer
// duty: a run's audit records are sealed while it serves, and the duty's
// last seal at the stop leaves none unsealed. The duties on PostgreSQL are
// the recovery sweep (under each entry's claim), the sealer and the
// schedule.
func TestServeOnPostgresSealsThroughItsDuty(t *testing.T) {
	dsn := testsvc.Postgres(t)
	dir := t.TempDir()
	dlq := filepath.Join(dir, "dlq.jsonl")
	if err := os.WriteFile(dlq, []byte(`{"id":"p1","topic":"tool.email.send","reason_code":"schema_invalid","idempotency_key":"p1","payload":{}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	approvers := filepath.Join(dir, "approvers.yaml")
	if err := os.WriteFile(approvers, []byte("groups: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := newRootCmd(&streams{in: strings.NewReader(""), out: &stdout, err: &stderr})
	cmd.SetArgs([]string{"serve", "--addr", "127.0.0.1:0", "--every", "1h", "--store", dsn, "--source", "jsonl:" + dlq,
		"--rules", "../../rules.yaml", "--policies", "../../policies", "--approvers", approvers, "--tokens", filepath.Join(dir, "tokens.json")})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), `msg="reconcile done"`) {
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run finished:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	logs := stderr.String()
	for _, want := range []string{`started" service=recover-dispatches every=10m0s`, `started" service=audit-sealer every=50ms`,
		`started" service=reconcile-schedule`, `stopped" service=reconcile-schedule`, `stopped" service=audit-sealer`,
		`stopped" service=recover-dispatches`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
	pg, err := postgres.Open(context.Background(), dsn, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	n, err := pg.AuditUnsealed(context.Background())
	if err != nil || n != 0 {
		t.Fatalf("%d audit records left unsealed (%v)", n, err)
	}
	head, _, _, err := pg.AuditSignedHead(context.Background())
	if err != nil || head == 0 {
		t.Fatalf("sealed head %d (%v): the run's records were not sealed", head, err)
	}
}
