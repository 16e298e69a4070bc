package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/triage"
)

// The bundled rules.yaml and policies/ are built into the binary (the
// module's root package). A command uses them when --rules or --policies
// is left at its default and the working directory has no such file: after
// `go install` replayctl works from any directory instead of exiting 2 with
// "cannot read rules". It says so on stderr, once.

const (
	defaultRules    = "rules.yaml"
	defaultPolicies = "policies"
)

func (f *engineFlags) builtinRules() bool {
	return f.useBuiltin("rules", f.rules, defaultRules)
}

func (f *engineFlags) builtinPolicies() bool {
	return f.useBuiltin("policies", f.policies, defaultPolicies)
}

// useBuiltin: the flag was not given (nor set from the environment or a
// config file), it names the default path, and nothing is there. A path
// that exists but cannot be read is the user's file and its error theirs.
func (f *engineFlags) useBuiltin(flag, value, def string) bool {
	if value != def || (f.flags != nil && f.flags.Changed(flag)) {
		return false
	}
	return !exists(value)
}

// loadBuiltin builds the engine from the built-in rules and/or policy and
// the files for the rest. The snapshot names files as LoadEngine does (the
// rules by base name, a policy by its path inside the directory), so the
// built-in defaults have the snapshot id of the checkout's files.
func (f *engineFlags) loadBuiltin(ctx context.Context, builtinRules, builtinPolicies bool) (*triage.Engine, triage.Snapshot, error) {
	f.noteBuiltin(builtinRules, builtinPolicies)
	var rules triage.SourceFile
	if builtinRules {
		r := replayctl.Rules()
		rules = triage.SourceFile{Name: r.Name, Text: r.Text}
	} else {
		data, err := os.ReadFile(f.rules)
		if err != nil {
			return nil, triage.Snapshot{}, &triage.ConfigError{Problems: []triage.Problem{{File: f.rules, Msg: fmt.Sprintf("cannot read rules: %v", errors.Unwrap(err))}}}
		}
		// Parsed here first so that a problem names the file as given.
		if _, err := triage.ParseRules(f.rules, data); err != nil {
			return nil, triage.Snapshot{}, err
		}
		rules = triage.SourceFile{Name: filepath.Base(f.rules), Text: string(data)}
	}
	var policies []triage.SourceFile
	if builtinPolicies {
		mods, _ := replayctl.Policies()
		policies = sourceFiles(mods)
	} else {
		files, _, err := policy.ReadDir(f.policies)
		if err != nil {
			return nil, triage.Snapshot{}, err
		}
		for _, p := range files {
			name := filepath.Base(p.Name)
			if rel, err := filepath.Rel(f.policies, p.Name); err == nil && !strings.HasPrefix(rel, "..") {
				name = rel
			}
			policies = append(policies, triage.SourceFile{Name: filepath.ToSlash(name), Text: p.Text})
		}
	}
	snap := triage.NewSnapshot(rules, policies)
	eng, err := policy.EngineFromSnapshot(ctx, snap, f.policyTimeout)
	if err != nil {
		return nil, triage.Snapshot{}, err
	}
	return eng, snap, nil
}

func (f *engineFlags) noteBuiltin(builtinRules, builtinPolicies bool) {
	if f.notes == nil {
		return
	}
	f.noted.Do(func() {
		var what []string
		if builtinRules {
			what = append(what, "no "+defaultRules+" here: using the built-in rules (replayctl rules show)")
		}
		if builtinPolicies {
			what = append(what, "no "+defaultPolicies+"/ here: using the built-in policy (replayctl policy show)")
		}
		fmt.Fprintf(f.notes, "note: %s\n", strings.Join(what, "; "))
	})
}

// describe names the rules and the policy directory in use, for messages.
func (f *engineFlags) describe() (rules, policies string) {
	rules, policies = f.rules, f.policies
	if f.builtinRules() {
		rules = "built-in " + defaultRules
	}
	if f.builtinPolicies() {
		policies = "built-in " + defaultPolicies + "/"
	}
	return rules, policies
}

// exists: something is at path (a broken link too).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

func sourceFiles(files []replayctl.File) []triage.SourceFile {
	out := make([]triage.SourceFile, len(files))
	for i, f := range files {
		out[i] = triage.SourceFile{Name: f.Name, Text: f.Text}
	}
	return out
}

func newRulesShowCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Print the built-in rules (the bundled rules.yaml), a starting point for your own",
		Long: `show prints the rules built into replayctl: the rules.yaml a command uses when
neither --rules is given nor a rules.yaml is in the working directory.
  replayctl rules show > rules.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(s.out, replayctl.Rules().Text)
			return err
		},
	}
}

func newPolicyShowCmd(s *streams) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "show [FILE] [--dir DIR]",
		Short: "Print the built-in policy (the bundled policies/), or write it to a directory",
		Long: `show prints the Rego policy built into replayctl, the policies/ a command uses
when neither --policies is given nor a policies/ directory is in the working
directory: every file with a "# policies/NAME" line before it, or one FILE
(replayctl.rego). --dir DIR writes the files (tests included) into DIR
instead, refusing to overwrite one:
  replayctl policy show --dir policies && replayctl policy test`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mods, tests := replayctl.Policies()
			files := append(mods, tests...)
			if len(args) == 1 {
				for _, f := range files {
					if f.Name == args[0] || "policies/"+f.Name == args[0] {
						_, err := fmt.Fprint(s.out, f.Text)
						return err
					}
				}
				var names []string
				for _, f := range files {
					names = append(names, f.Name)
				}
				return usageError("no built-in policy file %q (have %s)", args[0], strings.Join(names, ", "))
			}
			if dir != "" {
				return writePolicyFiles(s, dir, files)
			}
			for i, f := range files {
				if i > 0 {
					fmt.Fprintln(s.out)
				}
				fmt.Fprintf(s.out, "# policies/%s\n%s", f.Name, f.Text)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "write the files into this directory (created if missing) instead of printing them")
	return cmd
}

// writePolicyFiles writes every file or none: an existing one is refused
// before anything is written.
func writePolicyFiles(s *streams, dir string, files []replayctl.File) error {
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if _, err := os.Lstat(p); err == nil {
			return &exitErr{code: exitError, err: fmt.Errorf("%s exists: not overwriting it (remove it or choose another --dir)", p)}
		}
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(f.Text), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(s.out, "wrote %s\n", p)
	}
	return nil
}
