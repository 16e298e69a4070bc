package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/runs"
	"github.com/replayctl/replayctl/internal/store"
)

// newRunsCmd: bulk replays and reconciles are runs with an id, kept in the
// state store, so they can be followed and cancelled from another process
// (or through --server).
func newRunsCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "Follow and cancel bulk replays and reconciles (list, show, cancel)",
		Long: `Every bulk replay or resolve (dlq replay/resolve --filter) and every reconcile is a
run with an id: its operation, who started it, its state (running, succeeded,
failed, cancelled) and progress (total, done, succeeded, failed, held, rate, ETA).
Runs are kept in the state store; with a bbolt file the process running one
holds the file, so follow and cancel it through that process's server
(--server), or, with --store postgres://..., from anywhere.

cancel stops new dispatches of a running run; dispatches already in flight
record their outcome. Running the same operation again resumes it: committed
keys are never sent twice.`,
	}
	cmd.AddCommand(newRunsListCmd(s), newRunsShowCmd(s), newRunsCancelCmd(s), newRunsStartCmd(s))
	return cmd
}

// runStore is the run-record side of a state store.
func runStore(st store.Backend) (runs.Store, error) {
	return st, nil
}

// localView: a bbolt file is held by one process at a time, so when this
// process could open it, a run still recorded as running has no process
// left (killed, or the machine went down).
func localView(st store.Backend, r runs.Record) runs.Record {
	if st.Features().Shared {
		return r
	}
	return runs.Orphaned(r)
}

func runsErr(err error) error {
	switch {
	case errors.Is(err, runs.ErrNotFound):
		return &exitErr{code: exitUsage, err: err}
	case errors.Is(err, runs.ErrFinished):
		return &exitErr{code: exitError, err: err}
	}
	return err
}

func newRunsListCmd(s *streams) *cobra.Command {
	var db dbFlags
	var outF string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--limit N] [-o json]",
		Short: "List runs, newest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			if limit < 1 {
				return usageError("--limit must be at least 1")
			}
			type listing struct {
				Items []runs.Record `json:"items"`
			}
			l, err := fetch(cmd.Context(), &db, "/api/runs", url.Values{"limit": {strconv.Itoa(limit)}},
				func(st store.Backend) (listing, error) {
					rs, err := runStore(st)
					if err != nil {
						return listing{}, err
					}
					items, err := runs.List(cmd.Context(), rs, limit)
					for i := range items {
						items[i] = localView(st, items[i])
					}
					return listing{Items: items}, err
				})
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(s.out, l)
			}
			printRuns(s.out, l.Items)
			return nil
		},
	}
	db.register(cmd.Flags())
	cmd.Flags().IntVar(&limit, "limit", 20, "how many runs")
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

func progressOf(r runs.Record) string {
	if r.Total > 0 {
		return fmt.Sprintf("%d/%d", r.Done, r.Total)
	}
	return strconv.Itoa(r.Done)
}

func printRuns(w io.Writer, list []runs.Record) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tOPERATION\tSTATE\tACTOR\tSTARTED\tDONE\tSUCCEEDED\tFAILED\tHELD")
	for _, r := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", r.ID, r.Op, r.State, orDash(r.Actor),
			r.Started.Format(time.RFC3339), progressOf(r), r.Succeeded, r.Failed, r.Held)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d run(s)\n", len(list))
}

func newRunsShowCmd(s *streams) *cobra.Command {
	var db dbFlags
	var outF string
	cmd := &cobra.Command{
		Use:   "show ID [-o json]",
		Short: "Show one run: state and progress",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			r, err := fetch(cmd.Context(), &db, "/api/runs/"+url.PathEscape(args[0]), nil,
				func(st store.Backend) (runs.Record, error) { return getRun(cmd.Context(), st, args[0]) })
			if err != nil {
				return runsErr(err)
			}
			if format == "json" {
				return writeJSON(s.out, r)
			}
			printRun(s.out, r)
			return nil
		},
	}
	db.register(cmd.Flags())
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

func getRun(ctx context.Context, st store.Backend, id string) (runs.Record, error) {
	rs, err := runStore(st)
	if err != nil {
		return runs.Record{}, err
	}
	r, err := runs.Get(ctx, rs, id)
	return localView(st, r), err
}

func printRun(w io.Writer, r runs.Record) {
	fmt.Fprintf(w, "run        %s\noperation  %s (%s)\nactor      %s\nstate      %s\n", r.ID, r.Op, orDash(r.Trigger), orDash(r.Actor), r.State)
	if r.Owner != "" {
		fmt.Fprintf(w, "owner      %s\n", r.Owner)
	}
	fmt.Fprintf(w, "progress   %s done: %d succeeded, %d failed, %d held\n", progressOf(r), r.Succeeded, r.Failed, r.Held)
	if r.Summary != "" {
		fmt.Fprintf(w, "delivery   %s\n", r.Summary)
	}
	fmt.Fprintf(w, "rate       %.1f/s", r.Rate)
	if r.ETA != "" {
		fmt.Fprintf(w, ", ETA %s", r.ETA)
	}
	fmt.Fprintf(w, "\nstarted    %s\n", r.Started.Format(time.RFC3339))
	if !r.Finished.IsZero() {
		fmt.Fprintf(w, "finished   %s\n", r.Finished.Format(time.RFC3339))
	}
	if r.CancelRequested {
		fmt.Fprintf(w, "cancel     requested by %s\n", orDash(r.CancelledBy))
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error      %s\n", r.Error)
	}
}

func newRunsCancelCmd(s *streams) *cobra.Command {
	var db dbFlags
	var actor actorFlag
	var outF string
	cmd := &cobra.Command{
		Use:   "cancel ID [--as USER] [-o json]",
		Short: "Cancel a running run: no new dispatch starts; those in flight record their outcome",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			r, err := change(cmd.Context(), &db, "/api/runs/"+url.PathEscape(args[0])+"/cancel", nil,
				func(st store.Backend) (runs.Record, error) {
					r, err := getRun(cmd.Context(), st, args[0])
					if err != nil {
						return r, err
					}
					if r.State != runs.Running {
						return r, fmt.Errorf("%w: %s is %s", runs.ErrFinished, r.ID, r.Describe())
					}
					rs, _ := runStore(st)
					return runs.Cancel(cmd.Context(), rs, args[0], actor.as)
				})
			if err != nil {
				return runsErr(err)
			}
			if format == "json" {
				return writeJSON(s.out, r)
			}
			fmt.Fprintf(s.out, "%s: cancel requested (%s done); dispatches in flight record their outcome\n", r.ID, progressOf(r))
			return nil
		},
	}
	db.register(cmd.Flags())
	actor.register(cmd.Flags())
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}
