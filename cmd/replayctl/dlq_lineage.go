package main

import (
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
)

// printLineage prints an entry's replay lineage (dlq show, audit explain).
func printLineage(w io.Writer, c *replay.LineageChain) {
	if c == nil || len(c.Members) < 2 && c.Released == 0 {
		return
	}
	fmt.Fprintf(w, "lineage    %s: %d replay(s) counted against max_replays\n", c.Root, c.Used)
	fmt.Fprintf(w, "chain      %s\n", c)
	if c.Released > 0 {
		fmt.Fprintf(w, "released   after %d replay(s) by %s: %s\n", c.Released, orDash(c.ReleasedBy), c.ReleaseReason)
	}
}

func newDLQReleaseLineageCmd(s *streams) *cobra.Command {
	var db dbFlags
	var actor actorFlag
	var reason, outF string
	cmd := &cobra.Command{
		Use:   "release-lineage ID --reason TEXT [-o json]",
		Short: "Release the replay budget of an entry's lineage: max_replays counts its chain again from 0",
		Long: `A system that re-creates an entry when it is replayed (a Cordum retry job
<id>-retry-<8hex>, a Nexora record of the same goal and context) forms a
lineage, and max_replays counts every replay in it. release-lineage lets the
chain be replayed again (the reason is required and audited); the entry,
if it waits in manual review, is decided afresh by the next reconcile.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			if reason == "" {
				return &exitErr{code: exitUsage, err: fmt.Errorf("release-lineage needs --reason TEXT (it is audited)")}
			}
			chain, err := change(cmd.Context(), &db, "/api/dead-letters/"+url.PathEscape(args[0])+"/release-lineage", map[string]string{"reason": reason},
				func(st store.Backend) (*replay.LineageChain, error) {
					return replay.ReleaseLineage(cmd.Context(), st, args[0], actor.as, reason, time.Now())
				})
			if err != nil {
				return entryErr(err)
			}
			if format == "json" {
				return writeJSON(s.out, chain)
			}
			fmt.Fprintf(s.out, "lineage %s released after %d replay(s); max_replays counts again from 0\n", chain.Root, chain.Released)
			printLineage(s.out, chain)
			return nil
		},
	}
	db.register(cmd.Flags())
	actor.register(cmd.Flags())
	cmd.Flags().StringVar(&reason, "reason", "", "why the lineage may be replayed again (required, audited)")
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}
