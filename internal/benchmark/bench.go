package benchmark

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/triage"
)

// Config sets a run up.
type Config struct {
	Quick    bool   // tiny sizes: a smoke run
	Dir      string // scratch directory (corpora, databases)
	Self     string // the replayctl binary, for child processes ("" skips the memory rows)
	Rules    string
	Policies string
	Out      io.Writer
	// Progress, when set, is told what is being measured.
	Progress func(string)
	// Only, when set, runs only the steps whose name contains it
	// (decisions, ledger, replays, memory, micro, workers, reads, pgread, size, backtest, prune, brokers).
	Only string
	// PruneEntries, when set, is the prune rows' store size (default:
	// 1,000,000, or 2,000 quick); PruneRounds their rounds (default 3, or 1
	// quick): a 1M store takes minutes a round on a shared machine.
	PruneEntries, PruneRounds int
}

// Row is one line of the table.
type Row struct {
	Measure  string  `json:"measure"`
	Figure   float64 `json:"figure"`
	Unit     string  `json:"unit"`
	Baseline float64 `json:"baseline,omitempty"`
	// Ratio compares the figure with its baseline, as Note says.
	Ratio  float64 `json:"ratio,omitempty"`
	Target string  `json:"target,omitempty"`
	Note   string  `json:"note,omitempty"`
}

func (c *Config) size(full, quick int) int {
	if c.Quick {
		return quick
	}
	return full
}

func (c *Config) progress(s string) {
	if c.Progress != nil {
		c.Progress(s)
	}
}

func (c *Config) engine(ctx context.Context) (*triage.Engine, error) {
	eng, _, err := policy.LoadEngine(ctx, c.Rules, c.Policies, 0)
	return eng, err
}

// corpus writes (once) a jsonl corpus of n entries.
func (c *Config) corpus(name string, o gen.Options) (string, error) {
	path := filepath.Join(c.Dir, name)
	if _, err := os.Stat(path); err == nil {
		return "jsonl:" + path, nil
	}
	return gen.Write(jsonl.GenFormat(), path, o)
}

// steps are the measurements in the order Run takes them; Config.Only
// picks those whose name contains it.
var steps = []struct {
	name string
	fn   func(context.Context, *Config) ([]Row, error)
}{{"decisions", decisions}, {"memory", memory}, {"ledger", ledger}, {"replays", replays}, {"floor", floor}, {"safe", safe}, {"micro", micro}, {"workers", workers}, {"reads", reads}, {"pgread", pgReads}, {"size", size}, {"backtest", backtestRows}, {"prune", pruneRows}, {"brokers", brokers}}

// Steps names the measurements, for --only.
func Steps() []string {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.name
	}
	return names
}

// Run measures everything (or Config.Only's steps) and returns the rows.
// An Only that names no step is an error, not an empty table.
func Run(ctx context.Context, c Config) ([]Row, error) {
	if c.Only != "" && !slices.ContainsFunc(Steps(), func(name string) bool { return strings.Contains(name, c.Only) }) {
		return nil, fmt.Errorf("--only %q names no measurement (one of %s)", c.Only, strings.Join(Steps(), ", "))
	}
	var rows []Row
	for _, step := range steps {
		if c.Only != "" && !strings.Contains(step.name, c.Only) {
			continue
		}
		r, err := step.fn(ctx, &c)
		if err != nil {
			return rows, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// paired runs a and b alternately, k times each (a, b, a, b, ...), so
// that the machine's drift and other load fall on both alike, and returns
// the median duration of each.
func paired(k int, a, b func() (time.Duration, error)) (time.Duration, time.Duration, error) {
	var as, bs []float64
	for range k {
		for _, run := range []struct {
			fn  func() (time.Duration, error)
			out *[]float64
		}{{a, &as}, {b, &bs}} {
			d, err := run.fn()
			if err != nil {
				return 0, 0, err
			}
			*run.out = append(*run.out, float64(d))
		}
	}
	return time.Duration(median(as)), time.Duration(median(bs)), nil
}

// medianDuration is the median of durations (rounds measured in a loop of
// more than two alternating runs, where paired does not fit).
func medianDuration(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(median(xs))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// Machine describes where the figures were measured.
func Machine() string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	var deps []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if strings.Contains(d.Path, "open-policy-agent/opa") || strings.Contains(d.Path, "bbolt") || strings.Contains(d.Path, "pgx") {
				deps = append(deps, d.Path+" "+d.Version)
			}
		}
	}
	sort.Strings(deps)
	return fmt.Sprintf("%d CPUs (%s), %s/%s, %s; %s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, runtime.Version(), strings.Join(deps, ", "))
}

// Print writes the table.
func Print(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "| measure | figure | baseline | ratio | target |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		base, ratio := "", ""
		if r.Baseline > 0 {
			base = human(r.Baseline) + " " + r.Unit
		}
		if r.Ratio > 0 {
			ratio = fmt.Sprintf("%.2fx", r.Ratio)
			if r.Note != "" {
				ratio += " " + r.Note
			}
		} else if r.Note != "" {
			ratio = r.Note
		}
		fmt.Fprintf(w, "| %s | %s %s | %s | %s | %s |\n", r.Measure, human(r.Figure), r.Unit, base, ratio, r.Target)
	}
}

func human(f float64) string {
	switch {
	case f >= 100:
		return fmt.Sprintf("%.0f", f)
	case f >= 10:
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprintf("%.2f", f)
}
