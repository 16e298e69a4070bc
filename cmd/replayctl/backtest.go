package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/backtest"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// periodFlag is a --since/--keep value: "30d" or a Go duration.
type periodFlag struct{ d *time.Duration }

func (f periodFlag) String() string {
	if f.d == nil {
		return ""
	}
	return triage.Period(*f.d).String()
}

func (f periodFlag) Set(v string) error {
	d, err := triage.ParsePeriod(v)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

func (periodFlag) Type() string { return "period" }

func newPolicyBacktestCmd(s *streams) *cobra.Command {
	var db dbFlags
	var cand, base engineFlags
	var srcs sourceFlags
	var since time.Duration
	var outF string
	var samples int
	cmd := &cobra.Command{
		Use:   "backtest --rules R --policies DIR [--since 30d] [--source KIND:PATH ...] [-o json]",
		Short: "Re-decide past decisions with candidate rules and policy, and report what would change",
		Long: `backtest re-decides every decision recorded in the audit trail since --since
with the candidate rules (--rules) and policy (--policies), each from the
inputs it recorded (entry, ledger view, decision time), as audit
replay-decision does for one, and reports how many would change, from
which action to which, by rule and failure signature, with samples, and
lists the entries that would now be replayed automatically.

With --source it decides the entries read from those sources instead, with
today's rules (--baseline-rules, --baseline-policies) and with the
candidate, against the ledger as it is now.

It never acts: the state is opened read-only and nothing is written.`,
		Example: `  replayctl policy backtest --rules rules.next.yaml --policies policies.next --since 30d`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			engine, snap, err := policy.LoadEngine(ctx, cand.rules, cand.policies, cand.policyTimeout)
			if err != nil {
				return err
			}
			now := time.Now()
			opts := backtest.Options{Engine: engine, Samples: samples}
			if since > 0 {
				opts.Since = now.Add(-since).UTC()
			}
			var rep *backtest.Report
			switch {
			case len(srcs.specs) > 0:
				if db.remote.enabled() {
					return usageError("--source reads the sources here: give it without --server")
				}
				rep, err = backtestSources(cmd, &db, &srcs, &base, opts, now)
			case db.remote.enabled():
				rep = &backtest.Report{}
				err = db.remote.call(ctx, "POST", "/api/policy/backtest", nil,
					server.BacktestRequest{Rules: snap.Rules, Policies: snap.Policies, Since: opts.Since}, rep)
			default:
				var st store.Backend
				if st, err = db.openExisting(); err != nil {
					return err
				}
				defer st.Close()
				rep, err = backtest.Decisions(ctx, st, opts)
			}
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(s.out, rep)
			}
			printBacktest(s.out, rep, len(srcs.specs) > 0)
			return nil
		},
	}
	db.register(cmd.Flags())
	cand.register(cmd.Flags(), s.err)
	srcs.register(cmd.Flags())
	cmd.Flags().Var(periodFlag{&since}, "since", "only decisions recorded this long ago or later, e.g. 30d (default: all)")
	cmd.Flags().StringVar(&base.rules, "baseline-rules", "rules.yaml", "with --source: today's rules, to compare the candidate with")
	cmd.Flags().StringVar(&base.policies, "baseline-policies", "policies", "with --source: today's policies")
	cmd.Flags().IntVar(&samples, "samples", 3, "samples shown per group")
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

// backtestSources decides what the sources hold now with the baseline and
// the candidate, both at the same time against the same ledger view.
func backtestSources(cmd *cobra.Command, db *dbFlags, srcs *sourceFlags, base *engineFlags, opts backtest.Options, now time.Time) (*backtest.Report, error) {
	ctx := cmd.Context()
	baseline, _, err := policy.LoadEngine(ctx, base.rules, base.policies, policy.DefaultTimeout)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	list, err := srcs.open(nil)
	if err != nil {
		return nil, err
	}
	ledger, done, err := openLedgerReadOnly(db.path, db.dsn)
	if err != nil {
		return nil, err
	}
	defer done()
	var view backtest.LedgerView
	if ledger != nil {
		view = ledger.LedgerView
	}
	return backtest.Entries(ctx, source.All(list), view, baseline, now.UTC(), opts)
}

func printBacktest(w io.Writer, rep *backtest.Report, fromSources bool) {
	what := "decision(s) recorded"
	if fromSources {
		what = "entr(ies) read from the sources"
	}
	fmt.Fprintf(w, "backtest of candidate %s over %d %s", short(rep.Snapshot), rep.Decisions, what)
	if !rep.Since.IsZero() {
		fmt.Fprintf(w, " since %s", rep.Since.Format(time.RFC3339))
	}
	fmt.Fprintf(w, ": %d would change, %d would now be replayed automatically\n", rep.Changed, rep.NowAutoReplay)
	if rep.NoInputs > 0 {
		fmt.Fprintf(w, "%d decision(s) recorded without their inputs could not be re-decided\n", rep.NoInputs)
	}
	if rep.Unreadable > 0 {
		fmt.Fprintf(w, "%d stored record(s) could not be read (audit verify says where): not re-decided\n", rep.Unreadable)
	}
	if rep.Changed == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FROM\tTO\tCOUNT")
	for _, t := range rep.Transitions {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", t.From, t.To, t.Count)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tSIGNATURE\tCHANGE\tCOUNT\tSAMPLES")
	for _, g := range rep.Groups {
		refs := make([]string, len(g.Samples))
		for i, s := range g.Samples {
			refs[i] = sampleName(s)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s -> %s\t%d\t%s\n", g.Rule, g.Signature, g.From, g.To, g.Count, strings.Join(refs, ", "))
	}
	tw.Flush()
	if len(rep.AutoReplays) == 0 {
		return
	}
	fmt.Fprintf(w, "\nWOULD NOW BE REPLAYED AUTOMATICALLY (%d, first %d):\n", rep.NowAutoReplay, len(rep.AutoReplays))
	for _, s := range rep.AutoReplays {
		fmt.Fprintf(w, "  %s  %s -> %s  rule %s (was %s): %s\n", sampleName(s), s.From, s.To, s.Rule, s.WasRule, s.Why)
	}
}

func sampleName(s backtest.Sample) string {
	if s.Decision > 0 {
		return fmt.Sprintf("#%d %s", s.Decision, s.EntryRef)
	}
	return s.EntryRef
}
