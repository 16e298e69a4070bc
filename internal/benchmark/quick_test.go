package benchmark

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The quick run of the harness is shared: TestHarnessSmoke checks every
// row of it, and the tests of single steps (reads, pgread, size, backtest,
// prune) check their step's rows, which they used to measure again with a
// run of their own (Config.Only): 11.6 s of CPU and 24 s of the package's
// wall clock on the shared 2-core machine, for the same rows. The quick
// run is one Run per step, with Only naming the step, in Run's order and
// in one directory (steps reuse each other's corpora, as in a whole Run),
// so each step's rows are known and Only is exercised for every step.
var quick struct {
	once     sync.Once
	dir      string
	byStep   map[string][]Row
	rows     []Row // every step's, in Run's order
	progress strings.Builder
	err      error
}

// runSteps are Run's step names (Steps, from its table in bench.go), so
// that a step added there is in the smoke run too.
func runSteps() ([]string, error) {
	names := Steps()
	if len(names) < 10 {
		return nil, fmt.Errorf("bench.go: only %d steps in Run's table: %q", len(names), names)
	}
	return names, nil
}

// quickRun returns the rows of every step of the shared quick run (made
// by the first test that asks), by step name.
func quickRun(t *testing.T) (map[string][]Row, []Row) {
	t.Helper()
	quick.once.Do(func() {
		steps, err := runSteps()
		if err != nil {
			quick.err = err
			return
		}
		if quick.dir, err = os.MkdirTemp("", "replayctl-bench-"); err != nil {
			quick.err = err
			return
		}
		quick.byStep = map[string][]Row{}
		t0 := time.Now()
		for _, s := range steps {
			for _, other := range steps {
				if other != s && strings.Contains(other, s) {
					quick.err = fmt.Errorf("Only %q would also run step %q", s, other)
					return
				}
			}
			rows, err := Run(context.Background(), Config{Quick: true, Only: s, Dir: quick.dir, Rules: "../../rules.yaml", Policies: "../../policies",
				Progress: func(p string) { fmt.Fprintf(&quick.progress, "%6.1fs %s\n", time.Since(t0).Seconds(), p) }})
			if err != nil {
				quick.err = fmt.Errorf("step %s: %w", s, err)
				return
			}
			quick.byStep[s] = rows
			quick.rows = append(quick.rows, rows...)
		}
	})
	if quick.err != nil {
		t.Fatal(quick.err)
	}
	return quick.byStep, quick.rows
}

// quickRows is one step's rows of the shared quick run.
func quickRows(t *testing.T, step string) []Row {
	t.Helper()
	byStep, _ := quickRun(t)
	rows, ok := byStep[step]
	if !ok {
		t.Fatalf("Run has no step %q", step)
	}
	return rows
}
