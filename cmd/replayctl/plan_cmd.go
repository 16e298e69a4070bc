package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/replay"
)

// Approval of an exact plan (replay/plan_approval.go): dlq replay
// --request-approval keeps the previewed plan and asks for its approval;
// approvals approve PLAN (four-eyes); runs start PLAN executes exactly it.

// requestPlan is dlq replay --filter ... --request-approval.
func requestPlan(cmd *cobra.Command, s *streams, f *bulkFlags, format string, b *replay.Bulk) error {
	bf, err := f.build()
	if err != nil {
		return err
	}
	p, err := b.RequestPlan(cmd.Context(), bf, replay.PlanRequest{Reason: f.reason, TTL: f.planTTL, ApproverGroup: f.approverGroup})
	if err != nil {
		return planErr(err)
	}
	if format == "json" {
		return writeJSON(s.out, p)
	}
	printPlan(s.out, p)
	return nil
}

func printPlan(w io.Writer, p *replay.Plan) {
	fmt.Fprintf(w, "plan %s: %d entries to replay (of %d matching), approval requested from %s\n", p.ID, len(p.Refs), p.Matched, p.ApproverGroup)
	fmt.Fprintf(w, "fingerprint      %s\npolicy snapshot  %s\n", p.Fingerprint, p.PolicySnapshot)
	vel := "no --rate or --spread"
	switch {
	case p.Spread.Duration > 0:
		vel = "spread over " + p.Spread.String()
	case p.Rate > 0:
		vel = fmt.Sprintf("--rate %g/s", p.Rate)
	}
	fmt.Fprintf(w, "velocity         %s, %d at a time, cap %d\nexpires          %s\nreason           %s\n", vel, max(p.MaxParallel, 1), p.Max,
		p.ExpiresAt.UTC().Format(time.RFC3339), p.Reason)
	fmt.Fprintf(w, "samples          %s\n", strings.Join(p.Samples, ", "))
	if p.Blast != nil {
		fmt.Fprintln(w, "blast radius:")
		for _, l := range p.Blast.Describe() {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	fmt.Fprintf(w, "next: another person of %s runs `replayctl approvals approve %s`, then `replayctl runs start %s`\n", p.ApproverGroup, p.ID, p.ID)
}

func planErr(err error) error {
	switch {
	case errors.Is(err, replay.ErrBadFilter), errors.Is(err, replay.ErrNoTarget), errors.Is(err, replay.ErrNotFound):
		return &exitErr{code: exitUsage, err: err}
	case errors.Is(err, replay.ErrPlanNotApproved), errors.Is(err, replay.ErrPlanChanged), errors.Is(err, replay.ErrPlanExpired),
		errors.Is(err, replay.ErrState):
		return &exitErr{code: exitError, err: err}
	}
	return err
}

func newRunsStartCmd(s *streams) *cobra.Command {
	var (
		db    dbFlags
		actor actorFlag
		eng   engineFlags
		tgt   targetFlags
		outF  string
	)
	cmd := &cobra.Command{
		Use:   "start PLAN [--target URL]",
		Short: "Execute an approved plan: exactly its entries, at its velocity, once",
		Long: `start executes a plan that dlq replay --request-approval kept and another person
approved (approvals approve PLAN): exactly the entries previewed then, at the
plan's rate or spread. Entries that match the plan's filter but arrived later
are excluded and listed. A plan whose rules or policy changed since (another
policy snapshot), that expired, is not approved or already ran is refused
(exit 1) and nothing is sent.

With --server the running serve checks the plan, runs it with its own
targets, rules and policy (so its snapshot must be the plan's), and the
command waits for the run; the console's plan page (/plans/PLAN) has the
same start button.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			if db.remote.enabled() {
				if err := refuseIgnored(cmd, s, "--server", "the server starts the plan with its own targets, rules, policy and store, and the token says who acts",
					"target", "rules", "policies", "policy-timeout", "db", "store", "as"); err != nil {
					return err
				}
				return startPlanRemote(cmd, s, &db.remote, args[0], format)
			}
			engine, st, err := openActing(cmd.Context(), &eng, &db)
			if err != nil {
				return err
			}
			defer st.Close()
			r := &replay.Reconciler{Engine: engine, Store: st, Router: tgt.router(engine.Rules), Actor: actor.as, ForEntry: forEntry()}
			b := &replay.Bulk{Reconciler: r, Inventory: st}
			run, rctx, err := startCLIRun(cmd.Context(), st, "bulk-replay", actor.as, 0, s.err)
			if err != nil {
				return err
			}
			if run.t != nil {
				b.Run = run.t
			}
			rep, err := b.ExecutePlan(rctx, args[0])
			rec := run.finish(cmd.Context(), err, rep != nil && rep.Stopped != "")
			if err != nil {
				return planErr(err)
			}
			rep.Run, rep.RunState = rec.ID, rec.State
			return printPlanRun(s, rep, format)
		},
	}
	f := cmd.Flags()
	db.register(f)
	actor.register(f)
	eng.register(f, s.err)
	f.Var(targetURL{&tgt.url}, "target", "send the replays to this URL, overriding rules.yaml targets (not with --server: the server's targets apply)")
	f.StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

// printPlanRun prints an executed plan's report, as a bulk replay's.
func printPlanRun(s *streams, rep *replay.BulkReport, format string) error {
	if format == "json" {
		return writeJSON(s.out, rep)
	}
	rep.Items = nil
	printBulk(s.out, rep, &bulkFlags{preview: true})
	if p := rep.Plan; p != nil {
		fmt.Fprintf(s.out, "plan %s (approved by %s): %d entries\n", p.ID, p.ApprovedBy, p.Entries)
		if len(p.Excluded) > 0 {
			fmt.Fprintf(s.out, "excluded, arrived after the plan (%d): %s\n", len(p.Excluded), strings.Join(p.Excluded, ", "))
		}
	}
	if rep.Stopped != "" {
		return silent(exitError)
	}
	return nil
}

// startPlanRemote is runs start through a running `replayctl serve`: the
// server checks the plan (a refusal is the answer, nothing is sent), runs
// it with its targets and policy, and the command waits for the run.
func startPlanRemote(cmd *cobra.Command, s *streams, rf *remoteFlags, id, format string) error {
	var started struct {
		ID string `json:"id"`
	}
	if err := rf.call(cmd.Context(), "POST", "/api/plans/"+url.PathEscape(id)+"/start", nil, struct{}{}, &started); err != nil {
		return err
	}
	run, err := waitRun(cmd, rf, started.ID)
	if err != nil {
		return err
	}
	if run.Bulk == nil {
		return &exitErr{code: exitError, err: fmt.Errorf("run %s %s: %s", started.ID, run.State, run.Error)}
	}
	rep := run.Bulk
	rep.Run, rep.RunState = started.ID, run.State
	if run.Error != "" {
		rep.Stopped = firstNonEmpty(rep.Stopped, "run "+started.ID+" failed: "+run.Error)
	}
	return printPlanRun(s, rep, format)
}
