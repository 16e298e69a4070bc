package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/runs"
	"github.com/replayctl/replayctl/internal/server"
)

// bulkFlags select entries by filter instead of one ID.
type bulkFlags struct {
	filter                       bool
	classes, reasons, topics     []string
	sources, states, labels      []string
	groups                       []string
	olderThan, newerThan, spread time.Duration
	preview, yes, all            bool
	confirmOver, max             int
	resetBudget                  bool
	reason                       string // replay: why the budget is reset
	// canary (replay): a first slice, judged before the rest (canary.go).
	canary, abortOver string
	canaryWatch       time.Duration
	// requestApproval (replay): keep the plan and ask for its approval
	// instead of executing (plan_cmd.go).
	requestApproval bool
	planTTL         time.Duration
	approverGroup   string
}

// register adds the flags. The reason-code filter is only ever
// --reason-code: --reason is a resolution's free-text justification, and
// one name with two meanings once turned a typo into a resolve of the
// whole DLQ.
func (f *bulkFlags) register(fs *pflag.FlagSet, replayCmd bool) {
	fs.BoolVar(&f.filter, "filter", false, "act on every stored entry matching the filter flags instead of one ID (at least one filter flag, or --all)")
	fs.BoolVar(&f.all, "all", false, "with --filter and no filter flag: act on every stored entry")
	fs.StringArrayVar(&f.classes, "class", nil, "filter: class (repeatable)")
	fs.StringArrayVar(&f.reasons, "reason-code", nil, "filter: reason code (repeatable)")
	fs.StringArrayVar(&f.topics, "topic", nil, "filter: topic glob, e.g. 'tool.github.**' (repeatable)")
	fs.StringArrayVar(&f.sources, "source", nil, "filter: source kind (repeatable)")
	fs.StringArrayVar(&f.states, "state", nil, "filter: entry state (repeatable)")
	fs.StringArrayVar(&f.labels, "label", nil, "filter: label k=v (repeatable, all must hold)")
	fs.StringArrayVar(&f.groups, "group", nil, "filter: failure group id from groups list (repeatable; implies --filter)")
	fs.DurationVar(&f.olderThan, "older-than", 0, "filter: last failure at least this long ago")
	fs.DurationVar(&f.newerThan, "newer-than", 0, "filter: last failure at most this long ago")
	fs.BoolVar(&f.preview, "preview", false, "show what would happen, change nothing")
	fs.BoolVar(&f.yes, "yes", false, "execute without asking (needed off a terminal: without it only the preview is shown)")
	fs.IntVar(&f.confirmOver, "confirm-over", replay.DefaultConfirmOver, "on a terminal, above this many matches the confirmation is typing the number of entries, not y")
	fs.IntVar(&f.max, "max", replay.DefaultBulkMax, "cap on the replays (or resolves) of one operation")
	if replayCmd {
		fs.DurationVar(&f.spread, "spread", 0, "spread the replays evenly over this long (on top of --rate)")
		fs.BoolVar(&f.resetBudget, "reset-budget", false, "with --filter: re-arm entries that reached max_replays or failed, then replay them (needs --reason)")
		fs.StringVar(&f.reason, "reason", "", "with --reset-budget: why the entries are re-armed (recorded with every re-arm)")
		fs.StringVar(&f.canary, "canary", "", "with --filter or --group: replay a first slice of N entries or P% (spread across targets and topics), judge it, then the rest")
		fs.DurationVar(&f.canaryWatch, "canary-watch", replay.DefaultCanaryWatch, "with --canary: how long to wait after the slice before judging it")
		fs.StringVar(&f.abortOver, "abort-over", "0", "with --canary: the highest failure rate of the slice (0.05 or 5%) that lets the rest go on")
		fs.BoolVar(&f.requestApproval, "request-approval", false, "with --filter or --group: keep the previewed plan and ask for its approval (needs --reason); runs start PLAN executes it")
		fs.DurationVar(&f.planTTL, "plan-ttl", replay.DefaultPlanTTL, "with --request-approval: how long the plan stays valid")
		fs.StringVar(&f.approverGroup, "approver-group", "", "with --request-approval: who approves (default: the rules' default approver group)")
	}
}

// labelFilter reads repeated --label KEY=VALUE flags (dlq list and the
// bulk filters); nil when none is given.
func labelFilter(values []string) (map[string]string, error) {
	var out map[string]string
	for _, l := range values {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, usageError("--label %q: want KEY=VALUE", l)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out, nil
}

func (f *bulkFlags) build() (replay.BulkFilter, error) {
	bf := replay.BulkFilter{Classes: f.classes, Reasons: f.reasons, Topics: f.topics, Sources: f.sources,
		States: f.states, OlderThan: replay.Duration{Duration: f.olderThan}, NewerThan: replay.Duration{Duration: f.newerThan}, All: f.all,
		Groups: f.groups}
	labels, err := labelFilter(f.labels)
	if err != nil {
		return bf, err
	}
	bf.Labels = labels
	if f.max < 1 {
		return bf, usageError("--max must be at least 1")
	}
	if err := bf.Compile(); err != nil {
		return bf, &exitErr{code: exitUsage, err: err}
	}
	return bf, nil
}

// filterFlags are the flags that narrow a --filter selection.
var filterFlags = []string{"class", "reason-code", "topic", "source", "state", "label", "older-than", "newer-than", "group"}

// checkArgs: --filter takes no ID, otherwise exactly one; --filter needs
// at least one filter flag or an explicit --all. It runs before any state
// is opened, so a refused command changes nothing.
func (f *bulkFlags) checkArgs(cmd *cobra.Command, args []string) error {
	if len(f.groups) > 0 {
		f.filter = true // --group G is a filter of its own
	}
	if f.filter && len(args) > 0 {
		return usageError("give an ID or --filter, not both")
	}
	if f.all && !f.filter {
		return usageError("--all needs --filter")
	}
	if f.resetBudget && !f.filter {
		return usageError("--reset-budget needs --filter; to re-arm one entry use `dlq release ID`")
	}
	if f.resetBudget && strings.TrimSpace(f.reason) == "" {
		return usageError("--reset-budget needs --reason TEXT: it is recorded with every re-arm")
	}
	if f.canary != "" && !f.filter {
		return usageError("--canary needs --filter or --group: a canary is a first slice of a bulk replay")
	}
	if f.canary == "" && (cmd.Flags().Changed("abort-over") || cmd.Flags().Changed("canary-watch")) {
		return usageError("--abort-over and --canary-watch go with --canary N|P%%")
	}
	if f.requestApproval && !f.filter {
		return usageError("--request-approval needs --filter or --group: a plan is a bulk replay")
	}
	if f.requestApproval && (f.resetBudget || f.canary != "") {
		return usageError("--request-approval keeps a plan: give --reset-budget or --canary when it runs, not when it is requested")
	}
	if f.requestApproval && strings.TrimSpace(f.reason) == "" {
		return usageError("--request-approval needs --reason TEXT: approvers read it")
	}
	if !f.resetBudget && !f.requestApproval && f.reason != "" && cmd.Name() == "replay" {
		return usageError("--reason on a replay is only the justification of --reset-budget; to filter by reason code use --reason-code")
	}
	if f.filter {
		var set []string
		for _, n := range filterFlags {
			if fl := cmd.Flags().Lookup(n); fl != nil && fl.Changed {
				set = append(set, "--"+n)
			}
		}
		if len(set) == 0 && !f.all {
			return usageError("--filter without a filter flag would match every entry: give at least one of --%s, or --all to mean every entry", strings.Join(filterFlags, ", --"))
		}
		if len(set) > 0 && f.all {
			return usageError("--all together with %s: give filter flags or --all, not both", strings.Join(set, ", "))
		}
	}
	if !f.filter && len(args) != 1 {
		return usageError("%s needs an entry ID, or --filter with filter flags\nRun '%s --help' for usage.", cmd.CommandPath(), cmd.CommandPath())
	}
	return nil
}

func printBulk(w io.Writer, rep *replay.BulkReport, f *bulkFlags) {
	verb := rep.Op
	if rep.Preview {
		fmt.Fprintf(w, "preview of bulk %s: %d entries match; %d would %s (cap %d), %d would not\n", verb, rep.Matched, rep.Would, verb, rep.Max, rep.WouldNot)
	} else {
		fmt.Fprintf(w, "bulk %s (audit record %d): %d entries matched; %d handled; %d would %s, %d would not\n", verb, rep.AuditSeq, rep.Matched, rep.Done, rep.Would, verb, rep.WouldNot)
	}
	if rep.ResetBudget {
		would := "would be"
		if !rep.Preview {
			would = "were"
		}
		fmt.Fprintf(w, "reset-budget: %d %s re-armed (max_replays reached or failed), reason: %s\n", rep.ReArm, would, rep.Reason)
	}
	keys := make([]string, 0, len(rep.Why))
	for k := range rep.Why {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return rep.Why[keys[i]] > rep.Why[keys[j]] || rep.Why[keys[i]] == rep.Why[keys[j]] && keys[i] < keys[j]
	})
	for _, k := range keys {
		fmt.Fprintf(w, "  %6d  %s\n", rep.Why[k], k)
	}
	if rep.Blast != nil {
		fmt.Fprintln(w, "blast radius:")
		for _, l := range rep.Blast.Describe() {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	if len(rep.Replays) > 0 {
		// Every outcome, in a fixed order: a fixed list of names once
		// printed an empty "replays:" line for outcomes it did not know.
		keys := make([]string, 0, len(rep.Replays))
		for k := range rep.Replays {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprint(w, "replays:")
		for _, k := range keys {
			fmt.Fprintf(w, " %d %s", rep.Replays[k], k)
		}
		fmt.Fprintln(w)
	}
	if rep.Delivery != nil {
		fmt.Fprintf(w, "delivery: %s\n", rep.Delivery)
	}
	if c := rep.Canary; c != nil {
		verdict := "passed: the rest went on"
		if c.Aborted {
			verdict = fmt.Sprintf("ABORTED: the other %d entries were not touched", c.Untouched)
		}
		fmt.Fprintf(w, "canary: %d entries, watched %s, %d failed (rate %.0f%%, abort over %.0f%%): %s\n",
			len(c.Slice), c.Watch, c.Failed+c.Returned, 100*c.Rate, 100*c.AbortOver, verdict)
		for _, it := range c.Failures {
			fmt.Fprintf(w, "  %s  %s\n", it.Ref, it.Outcome)
		}
	}
	if rep.Run != "" {
		fmt.Fprintf(w, "run %s %s\n", rep.Run, rep.RunState)
	}
	if rep.Stopped != "" {
		fmt.Fprintln(w, rep.Stopped)
	}
	if rep.Preview && !f.preview {
		fmt.Fprintln(w, "nothing done: a bulk operation runs only when confirmed (on a terminal by answering; elsewhere by --yes): re-run with --yes to execute")
	}
}

// runBulk previews, then executes unless the preview must stand alone.
func runBulk(cmd *cobra.Command, s *streams, f *bulkFlags, format string, b *replay.Bulk, resolveReason string) error {
	bf, err := f.build()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	preview := b.PreviewReplay
	if resolveReason != "" {
		preview = b.PreviewResolve
	}
	rep, err := preview(ctx, bf)
	if err != nil {
		return bulkErr(err)
	}
	execute, asked := f.decideExecute(s, rep, stdinTerminal(s.in))
	if asked && !execute {
		fmt.Fprintln(s.err, "nothing done")
		return nil
	}
	if execute {
		op := "bulk-replay"
		if resolveReason != "" {
			op = "bulk-resolve"
		}
		run, rctx, err := startCLIRun(ctx, b.Inventory, op, b.Reconciler.Actor, rep.Matched, s.err)
		if err != nil {
			return err
		}
		if run.t != nil {
			b.Run = run.t
		}
		var canary *replay.Canary
		if resolveReason == "" {
			if canary, err = f.canaryOf(); err != nil {
				run.finish(ctx, err, false)
				return err
			}
		}
		switch {
		case resolveReason != "":
			rep, err = b.ExecuteResolve(rctx, bf, resolveReason)
		case canary != nil:
			rep, err = b.ExecuteCanary(rctx, bf, *canary)
		default:
			rep, err = b.ExecuteReplay(rctx, bf)
		}
		if rep != nil {
			run.delivered(rep.Delivery)
		}
		var rec runs.Record
		if err == nil && rep != nil && rep.Canary != nil && rep.Canary.Aborted {
			rec = run.finishAs(ctx, runs.AbortedByCanary)
		} else {
			rec = run.finish(ctx, err, rep != nil && rep.Stopped != "")
		}
		if err != nil {
			return bulkErr(err)
		}
		rep.Run, rep.RunState = rec.ID, rec.State
	}
	if format == "json" {
		return writeJSON(s.out, rep)
	}
	rep.Items = nil
	printBulk(s.out, rep, f)
	if rep.Stopped != "" {
		return silent(exitError)
	}
	return nil
}

func bulkErr(err error) error {
	if errors.Is(err, replay.ErrBadFilter) || errors.Is(err, replay.ErrNoTarget) {
		return &exitErr{code: exitUsage, err: err}
	}
	return err
}

// runBulkRemote is runBulk through a running `replayctl serve`: the same
// preview, the same --confirm-over/--yes gate, then the operation as a
// server run, waited for. The server's targets and policy apply.
func runBulkRemote(cmd *cobra.Command, s *streams, f *bulkFlags, format string, rf *remoteFlags, resolveReason string) error {
	bf, err := f.build()
	if err != nil {
		return err
	}
	path := "/api/dead-letters/replay"
	if resolveReason != "" {
		path = "/api/dead-letters/resolve"
	}
	req := server.BulkRequest{Filter: bf, Max: f.max, Spread: replay.Duration{Duration: f.spread}, Reason: resolveReason}
	if resolveReason == "" {
		if req.Canary, err = f.canaryOf(); err != nil {
			return err
		}
	}
	if f.resetBudget {
		req.ResetBudget, req.Reason = true, f.reason
	}
	ctx := cmd.Context()
	var rep replay.BulkReport
	if err := rf.call(ctx, "POST", path, url.Values{"preview": {"true"}}, req, &rep); err != nil {
		return err
	}
	execute, asked := f.decideExecute(s, &rep, stdinTerminal(s.in))
	if asked && !execute {
		fmt.Fprintln(s.err, "nothing done")
		return nil
	}
	if execute {
		var started struct {
			ID string `json:"id"`
		}
		if err := rf.call(ctx, "POST", path, nil, req, &started); err != nil {
			return err
		}
		run, err := waitRun(cmd, rf, started.ID)
		if err != nil {
			return err
		}
		if run.Bulk == nil {
			return fmt.Errorf("run %s %s: %s", started.ID, run.State, run.Error)
		}
		rep = *run.Bulk
		rep.Run, rep.RunState = started.ID, run.State
		if run.Error != "" {
			rep.Stopped = firstNonEmpty(rep.Stopped, "run "+started.ID+" failed: "+run.Error)
		}
	}
	if format == "json" {
		return writeJSON(s.out, &rep)
	}
	rep.Items = nil
	printBulk(s.out, &rep, f)
	if rep.Stopped != "" {
		return silent(exitError)
	}
	return nil
}

// waitRun polls a server run until it is no longer running.
func waitRun(cmd *cobra.Command, rf *remoteFlags, id string) (*server.Run, error) {
	var run server.Run
	for {
		if err := rf.call(cmd.Context(), "GET", "/api/runs/"+url.PathEscape(id), nil, nil, &run); err != nil {
			return nil, err
		}
		if run.State != "running" {
			return &run, nil
		}
		select {
		case <-cmd.Context().Done():
			return nil, &exitErr{code: exitError, err: fmt.Errorf("stopped waiting; run %s goes on on the server", id)}
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// canaryOf builds the canary of --canary (nil without one).
func (f *bulkFlags) canaryOf() (*replay.Canary, error) {
	if f.canary == "" {
		return nil, nil
	}
	c, err := replay.ParseCanary(f.canary)
	if err != nil {
		return nil, &exitErr{code: exitUsage, err: err}
	}
	if c.AbortOver, err = replay.ParseRate(f.abortOver); err != nil {
		return nil, &exitErr{code: exitUsage, err: err}
	}
	if f.canaryWatch < 0 {
		return nil, usageError("--canary-watch must not be negative")
	}
	c.Watch = replay.Duration{Duration: f.canaryWatch}
	return &c, nil
}
