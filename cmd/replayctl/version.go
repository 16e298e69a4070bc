package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/buildinfo"
)

func newVersionCmd(s *streams) *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date and Go/OPA/bbolt versions",
		Args:  noArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			o, err := outputFormat(output)
			if err != nil {
				return err
			}
			in := buildinfo.Get()
			if o == "json" {
				return writeJSON(s.out, in)
			}
			_, err = fmt.Fprint(s.out, versionText(in))
			return err
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return c
}

func versionText(in buildinfo.Info) string {
	mod := ""
	if in.Modified {
		mod = " (modified)"
	}
	return fmt.Sprintf("replayctl %s\ncommit:     %s%s\nbuilt:      %s\ngo:         %s\nopa:        %s\nbbolt:      %s\n",
		in.Version, in.Commit, mod, in.BuildDate, in.Go, in.OPA, in.Bbolt)
}
