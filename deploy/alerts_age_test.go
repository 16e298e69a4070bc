package deploy

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// TestOldestEntryAlertCountsFromLastFailure runs ReplayctlOldestEntryTooOld
// (promtool test rules) on the gauge replayctl itself exports for a real
// store, not on a number written by hand: an entry first seen 30 days ago
// that failed again an hour ago stays silent, and one first seen a minute
// ago (a new store reading an old DLQ) whose last failure was 10 days ago
// fires. With the age counted from first seen (issue 30) both were wrong.
func TestOldestEntryAlertCountsFromLastFailure(t *testing.T) {
	promtool := need(t, "promtool", "prometheus")
	rules := abs(t, "prometheus/alerts.yaml")
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name                   string
		firstSeen, lastFailure time.Time
		status                 string
		fires                  bool
	}{
		{"first seen long ago, failed again recently", now.AddDate(0, 0, -30), now.Add(-time.Hour), store.StatusPending, false},
		{"last failed long ago", now.Add(-time.Minute), now.AddDate(0, 0, -10), store.StatusQuarantined, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			st, err := bolt.Open(filepath.Join(dir, "replayctl.db"), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			r := &store.EntryRecord{Entry: entry.Entry{ID: "e1", Source: "jsonl", Topic: "orders", IdempotencyKey: "k1",
				Message: "upstream timeout", LastFailure: c.lastFailure, Payload: []byte(`{}`)},
				Status: c.status, Class: triage.Transient, Action: triage.AutoReplay, FirstSeen: c.firstSeen, LastSeen: now}
			if err := st.Update(context.Background(), func(tx store.Tx) error { return tx.PutEntry(r) }); err != nil {
				t.Fatal(err)
			}
			// The textfile a scheduled reconcile writes: the same collector /metrics serves.
			prom := filepath.Join(dir, "replayctl.prom")
			rm, err := server.NewRunMetrics(st, prom, func() time.Time { return now })
			if err != nil {
				t.Fatal(err)
			}
			if err := rm.Finish(nil); err != nil {
				t.Fatal(err)
			}
			age := gaugeValue(t, prom, "replayctl_oldest_open_entry_age_seconds")
			if want := now.Sub(c.lastFailure).Seconds(); age != want {
				t.Errorf("exported age %v s, want %v s (since the last failure)", age, want)
			}
			// Scraped every minute for an hour, growing; evaluated at 40m (past `for: 30m`).
			exp := "[]"
			if c.fires {
				exp = fmt.Sprintf(`
          - exp_labels: {severity: warning}
            exp_annotations:
              summary: "The oldest open DLQ entry last failed %s ago"
              runbook_url: "https://github.com/replayctl/replayctl/blob/main/docs/runbook.md#replayctloldestentrytooold"`,
					humanizeDuration(time.Duration(age)*time.Second+40*time.Minute))
			}
			test := fmt.Sprintf(`rule_files: [%q]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - {series: 'replayctl_oldest_open_entry_age_seconds{instance="a"}', values: '%d+60x60'}
    alert_rule_test:
      - eval_time: 40m
        alertname: ReplayctlOldestEntryTooOld
        exp_alerts: %s
`, rules, int64(age), exp)
			file := filepath.Join(dir, "age_test.yaml")
			if err := os.WriteFile(file, []byte(test), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput(); err != nil {
				t.Errorf("promtool test rules (fires=%v): %v\n%s\n%s", c.fires, err, out, test)
			}
		})
	}
}

// gaugeValue reads one unlabelled sample from a Prometheus text file.
func gaugeValue(t *testing.T, path, name string) float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return x
		}
	}
	t.Fatalf("%s has no %s", path, name)
	return 0
}

// humanizeDuration is Prometheus' template function for whole seconds of
// a day or more ("10d 0h 40m 0s").
func humanizeDuration(d time.Duration) string {
	s := int64(d.Seconds())
	return fmt.Sprintf("%dd %dh %dm %ds", s/86400, s%86400/3600, s%3600/60, s%60)
}
