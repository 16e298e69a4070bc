package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

func newStoreCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Look after the state store",
	}
	cmd.AddCommand(newStorePruneCmd(s), newStoreCompactCmd(s))
	return cmd
}

func newStoreCompactCmd(s *streams) *cobra.Command {
	var dbPath, out string
	cmd := &cobra.Command{
		Use:   "compact --out FILE [--db F]",
		Short: "Copy the bbolt file without its free pages, to give pruned space back",
		Long: `After store prune the bbolt file keeps its size: its freed pages are reused by
later writes, so a store pruned on a schedule stops growing. To shrink the
file, stop every replayctl process using it, compact it into a new file, and
move that file into place (as bbolt compact does). The original is never
changed.`,
		Example: `  replayctl store compact --db replayctl.db --out replayctl.compact.db && mv replayctl.compact.db replayctl.db`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError("--out FILE is required: the compacted copy is written there")
			}
			before, after, err := bolt.Compact(dbPath, out)
			if err != nil {
				return err
			}
			fmt.Fprintf(s.out, "compacted %s (%d bytes) into %s (%d bytes)\n", dbPath, before, out, after)
			return nil
		},
	}
	cmd.Flags().StringVar(&dbPath, "db", "replayctl.db", "state file (bbolt) to compact; no process may be using it")
	cmd.Flags().StringVar(&out, "out", "", "the compacted copy (must not exist)")
	return cmd
}

func newStorePruneCmd(s *streams) *cobra.Command {
	var db dbFlags
	var rulesPath, archive, beforeF, outF string
	var keep time.Duration
	var batch int
	cmd := &cobra.Command{
		Use:   "prune --archive FILE [--before T | --keep 90d] [--rules R]",
		Short: "Move closed entries and old audit records into a verifiable archive, then remove them",
		Long: `prune keeps the store bounded. Closed entries (replayed, resolved) whose last
activity is older than the retention (rules.yaml retention.closed, default
90d; --keep or --before override it) leave with their approvals, and so does
the audit chain's prefix before that time, up to the first record of an entry
that stays. Open entries are never pruned.

Everything that leaves is first written to --archive (gzip JSONL) with a
checkpoint of the chain at its last record, signed with the audit key; only
then is it removed, in bounded transactions. Afterwards audit verify checks
the live chain from that checkpoint, and audit verify --archive FILE...
checks the archives and the live chain end to end. Ledger records are
archived and kept: they stop a key that succeeded from being sent again.

A prune killed part way is finished by the next prune (which does nothing
else); the archive is never overwritten. The bbolt file reuses the freed
pages; to give the space back to the file system, stop the server and run
bbolt compact (see docs/retention.md). PostgreSQL (--store) is pruned the
same way, its rows deleted in batches (autovacuum reuses the space).`,
		Example: `  replayctl store prune --archive /backup/replayctl-$(date +%F).jsonl.gz`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			if archive == "" {
				return usageError("--archive FILE is required: what leaves the store is written there first")
			}
			if db.remote.enabled() {
				return usageError("store prune works on the store itself (--db or --store); a server prunes its own on its --prune-every schedule")
			}
			before, err := pruneCut(cmd, rulesPath, beforeF, keep)
			if err != nil {
				return err
			}
			key, err := db.key.key()
			if err != nil {
				return err
			}
			st, err := db.open()
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := st.Prune(cmd.Context(), store.PruneOptions{Before: before, Archive: archive, Key: key, Batch: batch})
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(s.out, res)
			}
			switch {
			case res.Resumed:
				fmt.Fprintf(s.out, "finished the prune into %s that was interrupted (nothing new pruned; run again for more)\n", res.Archive)
			case res.Entries+res.Audit+res.Approvals == 0:
				fmt.Fprintf(s.out, "nothing to prune before %s\n", before.Format(time.RFC3339))
				return nil
			default:
				fmt.Fprintf(s.out, "pruned before %s into %s\n", before.Format(time.RFC3339), res.Archive)
			}
			fmt.Fprintf(s.out, "entries: %d, approvals: %d, audit records: %d (ledger records archived and kept: %d)\n",
				res.Entries, res.Approvals, res.Audit, res.Ledger)
			if res.Base != nil {
				signed := "unsigned (no audit key)"
				if res.Base.MAC != "" {
					signed = "signed"
				}
				fmt.Fprintf(s.out, "the live chain now starts after record %d (%s), %s\n", res.Base.Seq, short(res.Base.Head), signed)
			}
			if res.HeldBy != "" {
				fmt.Fprintf(s.out, "the chain's prefix stops at record %d: entry %s stays (open, or closed too recently)\n", res.HeldAt, res.HeldBy)
			}
			return nil
		},
	}
	db.register(cmd.Flags())
	cmd.Flags().StringVar(&archive, "archive", "", "file to write what leaves the store to (gzip JSONL; never overwritten)")
	cmd.Flags().StringVar(&beforeF, "before", "", "prune what was last active before this time (RFC 3339), instead of the retention")
	cmd.Flags().Var(periodFlag{&keep}, "keep", "keep closed entries this long (default: rules.yaml retention.closed, else 90d)")
	cmd.Flags().StringVar(&rulesPath, "rules", "rules.yaml", "rules file whose retention section applies (ignored when missing)")
	cmd.Flags().IntVar(&batch, "batch", store.DefaultPruneBatch, "records removed per transaction")
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

// pruneCut is the time before which closed entries leave: --before, else
// now less --keep, else less the rules' retention (or its default).
func pruneCut(cmd *cobra.Command, rulesPath, before string, keep time.Duration) (time.Time, error) {
	if before != "" {
		if cmd.Flags().Changed("keep") {
			return time.Time{}, usageError("give --before or --keep, not both")
		}
		t, err := time.Parse(time.RFC3339, before)
		if err != nil {
			return time.Time{}, usageError("--before %q: want an RFC 3339 time such as 2026-08-01T00:00:00Z", before)
		}
		return t, nil
	}
	if keep <= 0 && cmd.Flags().Changed("keep") {
		return time.Time{}, usageError("--keep must be positive")
	}
	if keep <= 0 {
		keep = triage.DefaultClosedRetention
		if r, _, err := triage.LoadRules(rulesPath); err == nil {
			keep = r.Retention.ClosedFor()
		} else if cmd.Flags().Changed("rules") {
			return time.Time{}, err
		}
	}
	return time.Now().Add(-keep), nil
}

// verifyArchives verifies the archives, oldest first, and the live chain
// after them, end to end. The files are read here: not through a server.
func verifyArchives(cmd *cobra.Command, db *dbFlags, paths []string, o audit.VerifyOptions) (*audit.VerifyResult, error) {
	if db.remote.enabled() {
		return nil, usageError("--archive reads the archive files here: give it without --server")
	}
	readers := make([]io.Reader, 0, len(paths))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, usageError("--archive: %v", err)
		}
		defer f.Close()
		readers = append(readers, f)
	}
	st, err := db.openExisting()
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return audit.VerifyArchived(cmd.Context(), readers, st, o)
}
