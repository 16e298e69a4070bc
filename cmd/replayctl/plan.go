package main

import (
	"bufio"
	"encoding/json"
	"os"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

func newPlanCmd(s *streams) *cobra.Command {
	var (
		eng  engineFlags
		src  sourceFlags
		db   string
		dsn  string
		outF string
		rf   remoteFlags
	)
	cmd := &cobra.Command{
		Use:   "plan --source KIND:PATH... [--rules rules.yaml] [--policies policies] [--db replayctl.db] [-o table|json]",
		Short: "Show what reconcile would do with every entry, changing nothing",
		Long: `plan reads the sources, classifies every entry, applies rules.yaml and the
Rego policy, and prints the decision for each entry. It is a dry run: it writes
nothing, and reads the ledger (--db) only if the file already exists.

The table ends with a summary by class and action; -o json prints a JSON array
with one object per entry.`,
		Example: `  replayctl plan --source cordum:testdata/cordum/dlq.jsonl
  replayctl plan --source prodigy:~/.prodigy/dlq/myrepo --source nexora:export.json -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			if rf.enabled() {
				if len(src.specs) > 0 {
					return usageError("--source with --server: the server's sources, rules and policy apply")
				}
				return remotePlan(cmd, s, &rf, format)
			}
			return runPlan(cmd, s, &eng, &src, db, dsn, format)
		},
	}
	f := cmd.Flags()
	src.register(f)
	eng.register(f, s.err)
	f.StringVar(&db, "db", "replayctl.db", "ledger file, read if it exists (plan never creates or changes it)")
	f.StringVar(&dsn, "store", os.Getenv("REPLAYCTL_STORE"), "read the ledger from PostgreSQL instead (postgres://...)")
	f.StringVarP(&outF, "output", "o", "table", "output format: table or json")
	rf.register(f)
	return cmd
}

// remotePlan asks a running server for its plan (its sources, rules,
// policy and ledger) and prints it as a local plan would.
func remotePlan(cmd *cobra.Command, s *streams, rf *remoteFlags, format string) error {
	var got struct {
		Decisions []triage.Decision `json:"decisions"`
	}
	// The server pages the decisions (X-Next-Cursor): read them all.
	if err := rf.callPages(cmd.Context(), "/api/plan", nil, func(data []byte) error {
		var page struct {
			Decisions []triage.Decision `json:"decisions"`
		}
		if err := json.Unmarshal(data, &page); err != nil {
			return err
		}
		got.Decisions = append(got.Decisions, page.Decisions...)
		return nil
	}); err != nil {
		return err
	}
	out := bufio.NewWriterSize(s.out, 64<<10)
	defer out.Flush()
	sum := replay.NewSummary()
	arr := newJSONArray(out)
	if format == "table" {
		printDecisionHeader(out)
	}
	for i := range got.Decisions {
		d := &got.Decisions[i]
		sum.Add(d)
		if format == "json" {
			if err := arr.add(d); err != nil {
				return err
			}
			continue
		}
		printDecisionRow(out, d)
	}
	if format == "json" {
		return arr.end()
	}
	printSummary(out, sum)
	return nil
}

// runPlan decides every entry and prints the decisions (plan, and
// reconcile --dry-run).
func runPlan(cmd *cobra.Command, s *streams, eng *engineFlags, src *sourceFlags, db, dsn, format string) error {
	srcs, err := src.open(s.log)
	if err != nil {
		return err
	}
	engine, _, err := eng.load(cmd.Context())
	if err != nil {
		return err
	}
	ledger, closeLedger, err := openLedgerReadOnly(db, dsn)
	if err != nil {
		return err
	}
	defer closeLedger()
	if st, ok := ledger.(store.Store); ok {
		source.KeepStoredNames(srcs, storedRef(st))
	}

	out := bufio.NewWriterSize(s.out, 64<<10)
	defer out.Flush()
	sum := replay.NewSummary()
	prog := startProgress(s.err, "planned")
	defer prog.done()
	arr := newJSONArray(out)
	if format == "table" {
		printDecisionHeader(out)
	}
	// Decisions are made on every core and printed in input order.
	planner := &replay.Planner{Engine: engine, Ledger: ledger}
	err = planner.Plan(cmd.Context(), srcs, func(_ *entry.Entry, d *triage.Decision) error {
		sum.Add(d)
		prog.add(1)
		if format == "json" {
			return arr.add(d)
		}
		printDecisionRow(out, d)
		return nil
	})
	if err != nil {
		return err
	}
	if format == "json" {
		return arr.end()
	}
	printSummary(out, sum)
	return nil
}
