package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/benchmark"
	"github.com/replayctl/replayctl/internal/connector/registry"
	"github.com/replayctl/replayctl/internal/gen"
)

// newBenchCmd is `make bench`: hidden, it is for the project, not users.
func newBenchCmd(s *streams) *cobra.Command {
	var (
		quick bool
		only  string
		dir   string
		eng   engineFlags
		outF  string
		prune [2]int
	)
	cmd := &cobra.Command{
		Use:   "bench [--quick]",
		Short: "Measure replayctl against its physical limits (ratios to baselines measured in the same run)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			if only != "" && !slices.ContainsFunc(benchmark.Steps(), func(n string) bool { return strings.Contains(n, only) }) {
				return usageError("--only %q names no measurement (one of %s)", only, strings.Join(benchmark.Steps(), ", "))
			}
			if dir == "" {
				if dir, err = os.MkdirTemp("", "replayctl-bench-"); err != nil {
					return err
				}
				defer os.RemoveAll(dir)
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			rows, err := benchmark.Run(cmd.Context(), benchmark.Config{Quick: quick, Only: only, Dir: dir, Self: self, PruneEntries: prune[0], PruneRounds: prune[1],
				Rules: abs(eng.rules), Policies: abs(eng.policies),
				Progress: func(msg string) { fmt.Fprintln(s.err, "bench:", msg) }})
			if err != nil {
				return err
			}
			if format == "json" {
				return json.NewEncoder(s.out).Encode(map[string]any{"machine": benchmark.Machine(), "rows": rows})
			}
			fmt.Fprintf(s.out, "machine: %s\n\n", benchmark.Machine())
			benchmark.Print(s.out, rows)
			return nil
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "tiny sizes: a smoke run")
	cmd.Flags().StringVar(&only, "only", "", "run only these measurements ("+strings.Join(benchmark.Steps(), ", ")+")")
	cmd.Flags().IntVar(&prune[0], "prune-entries", 0, "the prune rows' store size (default 1000000; --quick 2000)")
	cmd.Flags().IntVar(&prune[1], "prune-rounds", 0, "the prune rows' rounds, medians kept (default 3; --quick 1)")
	cmd.Flags().StringVar(&dir, "dir", "", "scratch directory (default: a temporary one, removed after)")
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	eng.register(cmd.Flags(), s.err)
	cmd.AddCommand(newBenchPeakCmd(s))
	return cmd
}

// newBenchPeakCmd runs one replayctl command line in this process and then
// writes this process's own peak RSS to a file: the benchmark's memory rows
// measure the measured process itself. A child's rusage (ru_maxrss) starts
// from the peak of the process that forked it (the harness), so it cannot
// tell 35 MB from the harness's 135 MB; VmHWM in /proc/self/status belongs
// to this process's address space only.
func newBenchPeakCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:                "peak FILE COMMAND [ARGS...]",
		Short:              "Run a command line, then write this process's peak RSS (VmHWM, kB) to FILE",
		Hidden:             true,
		DisableFlagParsing: true,
		Args:               cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			code := run(args[1:], s.in, s.out, s.err)
			kb, err := benchmark.SelfPeakKB()
			if err != nil {
				return err
			}
			if err := os.WriteFile(args[0], []byte(fmt.Sprintln(kb)), 0o644); err != nil {
				return err
			}
			if code != 0 {
				return &exitErr{code: code, err: fmt.Errorf("%s exited %d", args[1], code)}
			}
			return nil
		},
	}
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// newGenCmd writes a realistic DLQ for trying replayctl out (hidden).
func newGenCmd(s *streams) *cobra.Command {
	var (
		o      gen.Options
		format string
		out    string
	)
	cmd := &cobra.Command{
		Use:   "gen --format jsonl|cordum|nexora|prodigy --n N --out PATH [--seed S]",
		Short: "Write a realistic DLQ of any size, deterministic from a seed",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" || o.N <= 0 {
				return usageError("--out and a positive --n are required")
			}
			gf, err := registry.GenFormat(format)
			if err != nil {
				return usageError("--format: %v", err)
			}
			spec, err := gen.Write(gf, out, o)
			if err != nil {
				return err
			}
			fmt.Fprintln(s.out, spec)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "jsonl", "jsonl, cordum, nexora or prodigy")
	f.IntVar(&o.N, "n", 1000, "entries")
	f.Uint64Var(&o.Seed, "seed", 1, "random seed (same seed, same bytes)")
	f.Float64Var(&o.Malformed, "malformed", 0.005, "share of malformed records")
	f.StringVar(&out, "out", "", "file (a directory for prodigy)")
	return cmd
}
