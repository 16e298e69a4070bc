package benchmark

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/testsvc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testsvc.Stop()
	if quick.dir != "" {
		_ = os.RemoveAll(quick.dir)
	}
	os.Exit(code)
}

// issueTargets are issue 16's targets, by the start of a row's measure:
// the table must show these, not looser ones.
var issueTargets = map[string]string{
	"decision throughput":                       ">= 0.8x",
	"durable ledger writes":                     ">= 0.7x",
	"replay throughput":                         ">= 0.5x",
	"replays, 2 worker(s) on PostgreSQL, 10 ms": ">= 1.8x",
	"replays, 4 worker(s) on PostgreSQL, 10 ms": ">= 3.5x",
	"peak RSS, plan 1000000 Prodigy items":      "< 64 MB",
	"peak RSS, plan 20000 Prodigy items":        "< 64 MB",
	"store bytes per input byte":                "<= 2x",
	"backtest throughput":                       ">= 0.8x",
	// issue 33
	"reconcile vs the minimal safe replay": ">= 0.8x",
}

// TestHarnessSmoke runs the harness at tiny sizes (quickRun) so it cannot rot. It
// checks that every row measured something and that ratio rows carry the
// issue's targets; it never asserts a time.
func TestHarnessSmoke(t *testing.T) {
	var b strings.Builder
	_, rows := quickRun(t)
	t.Log("\n" + quick.progress.String())
	if len(rows) < 14 {
		t.Fatalf("only %d rows", len(rows))
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if strings.HasPrefix(r.Note, "skipped") {
			if os.Getenv("CI") != "" {
				t.Errorf("%s skipped in CI: %s", r.Measure, r.Note)
			}
			continue
		}
		if r.Figure <= 0 || (r.Baseline > 0 && r.Ratio <= 0) {
			t.Errorf("row measured nothing: %+v", r)
		}
		for prefix, target := range issueTargets {
			if strings.HasPrefix(r.Measure, prefix) {
				seen[prefix] = true
				if r.Target != target {
					t.Errorf("%s: target %q, want the issue's %q", r.Measure, r.Target, target)
				}
			}
		}
	}
	for _, prefix := range []string{"decision throughput", "durable ledger writes", "replay throughput", "store bytes per input byte", "reconcile vs the minimal safe replay"} {
		if !seen[prefix] {
			t.Errorf("no %q row", prefix)
		}
	}
	Print(&b, rows)
	t.Log("\n" + b.String())
}

func TestSelfPeakKB(t *testing.T) {
	kb, err := SelfPeakKB()
	if err != nil {
		t.Fatal(err)
	}
	// A Go test binary's address space holds several MB at least.
	if kb < 1024 {
		t.Errorf("peak %d kB", kb)
	}
}

func TestPairedAlternatesAndTakesMedians(t *testing.T) {
	var order []string
	a, b := 0, 0
	ma, mb, err := paired(3, func() (time.Duration, error) {
		order = append(order, "a")
		a++
		return time.Duration([]int{5, 1, 3}[a-1]), nil
	}, func() (time.Duration, error) {
		order = append(order, "b")
		b++
		return time.Duration([]int{10, 30, 20}[b-1]), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(order, "") != "ababab" || ma != 3 || mb != 20 {
		t.Errorf("order %v, medians %v %v; want ababab, 3 and 20", order, ma, mb)
	}
}

// TestPruneRowsSmoke checks the prune rows of the quick run (quickRun).
func TestPruneRowsSmoke(t *testing.T) {
	rows := quickRows(t, "prune")
	if len(rows) != 3 {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		if r.Figure <= 0 || r.Ratio <= 0 {
			t.Errorf("row measured nothing: %+v", r)
		}
	}
	var b strings.Builder
	Print(&b, rows)
	t.Log("\n" + b.String())
}

// TestBacktestRowSmoke checks the backtest rows of the quick run (quickRun).
func TestBacktestRowSmoke(t *testing.T) {
	rows := quickRows(t, "backtest")
	if len(rows) != 2 || rows[0].Figure <= 0 || rows[0].Ratio <= 0 || rows[0].Target != ">= 0.8x" || rows[1].Figure <= 0 {
		t.Fatalf("rows %+v", rows)
	}
	var b strings.Builder
	Print(&b, rows)
	t.Log("\n" + b.String())
}

// TestRunRefusesAnUnknownStep: an --only that names no measurement is an
// error naming the measurements, not an empty table that looks like a run.
func TestRunRefusesAnUnknownStep(t *testing.T) {
	rows, err := Run(context.Background(), Config{Only: "groups"})
	if err == nil || !strings.Contains(err.Error(), "brokers") {
		t.Fatalf("Run with --only groups: %d rows, error %v; want an error listing the measurements", len(rows), err)
	}
}
