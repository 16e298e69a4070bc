package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/triage"
)

func newPolicyCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Work with the Rego policies",
	}
	var dir, outF string
	var verbose bool
	test := &cobra.Command{
		Use:   "test [--policies DIR]",
		Short: "Run the Rego tests (*_test.rego) of the policies",
		Long: `test runs every test_ rule of the *_test.rego files in the policy directory
against its policies, with the same restricted capabilities as replayctl uses
to decide (no http.send, net.lookup_ip_addr or opa.runtime).
Exit status 0 when all pass, 1 when one fails, 2 when a file does not compile.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			var policies, tests []triage.SourceFile
			if !cmd.Flags().Changed("policies") && dir == defaultPolicies && !exists(dir) {
				// No policies/ here: the built-in policy and its tests.
				fmt.Fprintln(s.err, "note: no policies/ here: testing the built-in policy (replayctl policy show)")
				mods, ts := replayctl.Policies()
				policies, tests = sourceFiles(mods), sourceFiles(ts)
			} else if policies, tests, err = policy.ReadDir(dir); err != nil {
				return err
			}
			if len(tests) == 0 {
				return usageError("no test files (*_test.rego) in %s", dir)
			}
			results, err := policy.RunTests(cmd.Context(), append(policies, tests...))
			if err != nil {
				return err
			}
			failed := 0
			for _, r := range results {
				if !r.Pass && !r.Skip {
					failed++
				}
			}
			if format == "json" {
				if err := writeJSON(s.out, results); err != nil {
					return err
				}
			} else {
				for _, r := range results {
					status := "PASS"
					switch {
					case r.Skip:
						status = "SKIP"
					case !r.Pass:
						status = "FAIL"
					}
					if verbose || status != "PASS" {
						fmt.Fprintf(s.out, "%s %s:%d %s.%s", status, r.File, r.Line, r.Package, r.Name)
						if r.Error != "" {
							fmt.Fprintf(s.out, ": %s", r.Error)
						}
						fmt.Fprintln(s.out)
					}
				}
				fmt.Fprintf(s.out, "%d passed, %d failed\n", len(results)-failed, failed)
			}
			if failed > 0 {
				return silent(exitError)
			}
			return nil
		},
	}
	test.Flags().StringVar(&dir, "policies", "policies", "directory of Rego policies and their *_test.rego tests")
	test.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	test.Flags().BoolVarP(&verbose, "verbose", "v", false, "list passing tests too")
	cmd.AddCommand(test, newPolicyShowCmd(s), newPolicyBacktestCmd(s))
	return cmd
}
