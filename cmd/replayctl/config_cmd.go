package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/config"
)

// flagNames are the long names of every flag of every command: the keys a
// config file may hold.
func flagNames(c *cobra.Command) map[string]bool {
	names := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(c)
	return names
}

func newConfigCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Show the effective configuration (flags, REPLAYCTL_* variables, replayctl.yaml)"}
	var output string
	show := &cobra.Command{
		Use:   "show [-o json]",
		Short: "Print every setting's effective value and origin (flag, env, file, default), secrets redacted",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o, err := outputFormat(output)
			if err != nil {
				return err
			}
			// Every command's flags, each once, with the file and the
			// environment applied as they would be for that command.
			seen := map[string]bool{}
			var all []config.Setting
			var walk func(*cobra.Command) error
			walk = func(cc *cobra.Command) error {
				fs := cc.LocalFlags()
				if cc == c.Root() {
					fs = cc.PersistentFlags()
				}
				if cc != c {
					if err := s.cfg.Apply(fs); err != nil {
						return usageError("%v", err)
					}
				}
				for _, st := range config.Effective(fs, s.cfg) {
					if !seen[st.Name] && st.Name != "output" {
						seen[st.Name] = true
						all = append(all, st)
					}
				}
				for _, sub := range cc.Commands() {
					if err := walk(sub); err != nil {
						return err
					}
				}
				return nil
			}
			if err := walk(c.Root()); err != nil {
				return err
			}
			slices.SortFunc(all, func(a, b config.Setting) int { return strings.Compare(a.Name, b.Name) })
			if o == "json" {
				return writeJSON(s.out, map[string]any{"file": s.cfg.File, "settings": all})
			}
			file := s.cfg.File
			if file == "" {
				file = "(none)"
			}
			fmt.Fprintf(s.out, "config file: %s\n\n%-20s %-8s %s\n", file, "SETTING", "ORIGIN", "VALUE")
			for _, st := range all {
				fmt.Fprintf(s.out, "%-20s %-8s %s\n", st.Name, st.Origin, st.Value)
			}
			return nil
		},
	}
	show.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.AddCommand(show)
	return cmd
}
