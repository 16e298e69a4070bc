package server

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// A fresh `serve --every 0` exported replayctl_reconcile_last_success_
// timestamp_seconds 0, so ReplayctlReconcileStalled fired within seconds
// and the dashboard showed 1.79e9 s (issue 30). Until a run succeeds there
// is no last success; a schedule exports when its first run was due, which
// the alert counts from instead.
func TestFreshServeExportsNoLastSuccessUntilOne(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	b := newAPIBundle(t, []string{line("e1", "timeout", "")}, func(c *Config) {
		c.Now = func() time.Time { return start }
	})
	m := scrape(t, b)
	for _, absent := range []string{"replayctl_reconcile_last_success_timestamp_seconds", "replayctl_reconcile_first_due_timestamp_seconds"} {
		if strings.Contains(m, absent) {
			t.Errorf("a serve without a schedule or a run exports %s:\n%s", absent, grepLines(m, absent))
		}
	}

	b2 := newAPIBundle(t, []string{line("e1", "timeout", "")}, func(c *Config) {
		c.Now = func() time.Time { return start }
		c.Every = time.Hour
	})
	ctx, cancel := context.WithCancel(context.Background())
	wg := b2.srv.Start(ctx)
	m = scrape(t, b2)
	if !strings.Contains(m, "\nreplayctl_reconcile_first_due_timestamp_seconds 1.8e+09\n") {
		t.Errorf("serve --every 1h: no first due time at its start:\n%s", grepLines(m, "replayctl_reconcile_"))
	}
	cancel()
	wg.Wait()
	b2.srv.Wait()

	b.reconcile("operator")
	m = scrape(t, b)
	if !strings.Contains(m, "\nreplayctl_reconcile_last_success_timestamp_seconds ") ||
		strings.Contains(m, "\nreplayctl_reconcile_last_success_timestamp_seconds 0\n") {
		t.Errorf("after a successful run: %s", grepLines(m, "last_success"))
	}
}

// RunMetrics (reconcile --metrics-file) carries the first run's due time
// from file to file and writes no last success before one.
func TestMetricsFileFirstDueAndNoZeroLastSuccess(t *testing.T) {
	path := t.TempDir() + "/replayctl.prom"
	first := time.Unix(1_800_000_000, 0)
	b := newAPIBundle(t, nil)
	r, err := NewRunMetrics(b.store, path, func() time.Time { return first })
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(io.ErrUnexpectedEOF); err != nil { // a failed first run
		t.Fatal(err)
	}
	r, err = NewRunMetrics(b.store, path, func() time.Time { return first.Add(5 * time.Minute) })
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(io.ErrUnexpectedEOF); err != nil {
		t.Fatal(err)
	}
	data := readFile(t, path)
	if !strings.Contains(data, "\nreplayctl_reconcile_first_due_timestamp_seconds 1.8e+09\n") {
		t.Errorf("the first run's due time is not kept:\n%s", grepLines(data, "replayctl_reconcile_"))
	}
	if strings.Contains(data, "replayctl_reconcile_last_success_timestamp_seconds") {
		t.Errorf("a last success written before any run succeeded:\n%s", grepLines(data, "last_success"))
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
