package main

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
)

func newStatsCmd(s *streams) *cobra.Command {
	var db dbFlags
	var outF string
	cmd := &cobra.Command{
		Use:   "stats [-o json]",
		Short: "Report entries by class, action and state, failure patterns, growth, replay-denial rate and approval latency",
		Long: `stats reads the state file and reports what an on-call team alerts on: DLQ
growth (new entries per day) and the replay-denial rate (replays proposed that
ended in anything but a replay), next to entries by class/action/state, the most
common failure patterns (grouped by error signature) and approval latency.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			rep, err := fetch(cmd.Context(), &db, "/api/stats", nil,
				func(st store.Backend) (*replay.Stats, error) {
					return replay.ComputeStats(cmd.Context(), st, time.Now())
				})
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(s.out, rep)
			}
			printStats(s.out, rep, db.remote.enabled())
			return nil
		},
	}
	db.register(cmd.Flags())
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

func printStats(w io.Writer, st *replay.Stats, serving bool) {
	fmt.Fprintf(w, "%d entries\n", st.Entries)
	for _, g := range []struct {
		name string
		m    map[string]int
	}{{"class", st.ByClass}, {"action", st.ByAction}, {"state", st.ByStatus}} {
		fmt.Fprintf(w, "by %-7s", g.name)
		keys := make([]string, 0, len(g.m))
		for k := range g.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %s=%d", orDash(k), g.m[k])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\ngrowth: %.1f new entries/day over the last 7 days\n", st.GrowthPerDay)
	for _, d := range st.Growth {
		fmt.Fprintf(w, "  %s  %d\n", d.Day, d.Count)
	}
	fmt.Fprintf(w, "replay-denial rate: %.1f%% (%d of %d proposed replays not replayed)\n", 100*st.DenialRate, st.Denied, st.Decisions)
	printBreakers(w, st.Breakers, serving)
	fmt.Fprintf(w, "approvals: %d pending, %d decided", st.Approvals.Pending, st.Approvals.Decided)
	if st.Approvals.LatencyP50 != "" {
		fmt.Fprintf(w, ", latency p50 %s, p90 %s, max %s", st.Approvals.LatencyP50, st.Approvals.LatencyP90, st.Approvals.LatencyMax)
	}
	fmt.Fprintln(w, "\n\nfailure patterns (most common first):")
	for _, p := range st.Patterns {
		fmt.Fprintf(w, "  %5d  %-15s %s  (e.g. %s)\n", p.Count, p.Class, p.Signature, p.Example)
	}
}

// printBreakers says where each target's circuit breaker stands. They are
// kept per serve process: a report read from the state file has none.
func printBreakers(w io.Writer, bs []replay.BreakerState, serving bool) {
	switch {
	case !serving:
		fmt.Fprintln(w, "breakers: per serve process (read from the state file, not a serve; stats --server URL shows a running serve's)")
		return
	case len(bs) == 0:
		fmt.Fprintln(w, "breakers: none tripped (no target tried since serve started)")
		return
	}
	fmt.Fprintln(w, "breakers:")
	for _, b := range bs {
		fmt.Fprintf(w, "  %-20s %-9s %d consecutive failure(s)", b.Target, b.State, b.Failures)
		if b.State == replay.BreakerOpen && !b.Until.IsZero() {
			fmt.Fprintf(w, ", next trial at %s", b.Until.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(w)
	}
}
