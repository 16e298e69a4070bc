package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/config"
)

// refuseIgnored fails with a usage error naming every flag of names given
// on the command line that the mode about to run ignores: `reconcile
// --server URL --source X` ran the server's sources and said nothing
// (issue 30). Settings from the environment or a config file are left
// alone: they are a host's defaults, not this command's request.
func refuseIgnored(cmd *cobra.Command, s *streams, mode, why string, names ...string) error {
	origin := map[string]string{}
	for _, st := range config.Effective(cmd.Flags(), s.cfg) {
		origin[st.Name] = st.Origin
	}
	var given []string
	for _, n := range names {
		if origin[n] == config.FromFlag {
			given = append(given, "--"+n)
		}
	}
	switch len(given) {
	case 0:
		return nil
	case 1:
		return usageError("%s with %s: %s, so %s would be ignored", given[0], mode, why, given[0])
	}
	return usageError("%s with %s: %s, so they would be ignored", strings.Join(given, ", "), mode, why)
}

// suggestFlag adds "did you mean" to an unknown-flag error: `--older-then`
// or `--dry_run` exited 2 naming only the flag (issue 30). The nearest
// flag of the command within two edits (or with the same letters but for
// dashes and underscores) is suggested.
func suggestFlag(c *cobra.Command, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		if sh, ok := strings.CutPrefix(msg, "unknown shorthand flag: "); ok {
			// unknown shorthand flag: 'x' in -xyz
			if i := strings.Index(sh, " in -"); i >= 0 && len(sh[i+5:]) > 1 {
				name = sh[i+5:] // -older-than typed with one dash
			}
		}
		if name == "" {
			return ""
		}
	}
	name, _, _ = strings.Cut(name, "=")
	norm := func(s string) string { return strings.ReplaceAll(s, "_", "-") }
	best, bestD := "", 3
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(norm(name), f.Name)
		if d < bestD || (d == bestD && f.Name < best) {
			best, bestD = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return "\nDid you mean --" + best + "?"
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
