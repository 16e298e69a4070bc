package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/triage"
)

func newRulesCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Work with rules.yaml",
	}
	var eng engineFlags
	var outF string
	check := &cobra.Command{
		Use:   "check [FILE]",
		Short: "Validate rules.yaml and compile the policies, printing every problem with file:line",
		Long: `check decodes the rules file strictly (unknown keys are errors), validates it,
and compiles the Rego policies. Every problem is printed as FILE:LINE: message.
Exit status 0 when both are valid, 2 otherwise.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				eng.rules = args[0]
			}
			_, snap, err := eng.load(cmd.Context())
			var ce *triage.ConfigError
			if errors.As(err, &ce) {
				if format == "json" {
					_ = writeJSON(s.out, map[string]any{"valid": false, "problems": ce.Problems})
				} else {
					for _, p := range ce.Problems {
						fmt.Fprintln(s.out, p.String())
					}
					fmt.Fprintf(s.out, "%d problem(s)\n", len(ce.Problems))
				}
				return silent(exitUsage)
			}
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(s.out, map[string]any{"valid": true, "problems": []triage.Problem{}, "policy_snapshot": snap.ID})
			}
			rules, policies := eng.describe()
			fmt.Fprintf(s.out, "%s: ok\n%s: ok (%d policy file(s))\npolicy snapshot %s\n", rules, policies, len(snap.Policies), snap.ID)
			return nil
		},
	}
	eng.register(check.Flags(), s.err)
	check.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	cmd.AddCommand(check, newRulesShowCmd(s))
	return cmd
}
