package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// auditKeyFlag reads the HMAC key that signs the audit chain head.
type auditKeyFlag struct{ file string }

func (f *auditKeyFlag) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.file, "audit-key-file", "", "file holding the HMAC key that signs the audit chain head (or set REPLAYCTL_AUDIT_KEY)")
}

func (f *auditKeyFlag) key() ([]byte, error) {
	if f.file != "" {
		b, err := os.ReadFile(f.file)
		if err != nil {
			return nil, usageError("read --audit-key-file: %v", err)
		}
		return []byte(strings.TrimSpace(string(b))), nil
	}
	return []byte(os.Getenv("REPLAYCTL_AUDIT_KEY")), nil
}

func newAuditCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read and verify the audit trail of every decision",
		Long: `Every decision, automatic or human, is an append-only audit record: who, what,
why, with which policy snapshot, and the ledger state before and after. Records
are hash-chained; audit verify walks the chain and reports the first broken link.`,
	}
	cmd.AddCommand(newAuditListCmd(s), newAuditShowCmd(s), newAuditVerifyCmd(s), newAuditExportCmd(s),
		newAuditExplainCmd(s), newAuditReplayDecisionCmd(s), newAuditCheckpointCmd(s))
	return cmd
}

func newAuditListCmd(s *streams) *cobra.Command {
	var (
		db          dbFlags
		q           audit.Query
		since, outF string
	)
	cmd := &cobra.Command{
		Use:   "list [--entry ID] [--actor A] [--action X] [--since T] [-o json]",
		Short: "List audit records, oldest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			if since != "" {
				t, err := parseSince(since)
				if err != nil {
					return err
				}
				q.Since = t
			}
			out := bufio.NewWriter(s.out)
			defer out.Flush()
			arr := newJSONArray(out)
			n := 0
			each := func(fn func(audit.Record) error) error {
				if db.remote.enabled() {
					v := url.Values{}
					for k, val := range map[string]string{"entry": q.Entry, "actor": q.Actor, "action": q.Action} {
						if val != "" {
							v.Set(k, val)
						}
					}
					if !q.Since.IsZero() {
						v.Set("since", q.Since.UTC().Format(time.RFC3339))
					}
					// The server pages the list (at most 1000 a page).
					return db.remote.callPages(cmd.Context(), "/api/audit", v, func(data []byte) error {
						var recs []audit.Record
						if err := json.Unmarshal(data, &recs); err != nil {
							return err
						}
						for _, r := range recs {
							if err := fn(r); err != nil {
								return err
							}
						}
						return nil
					})
				}
				st, err := db.openExisting()
				if err != nil {
					return err
				}
				defer st.Close()
				return replay.EachAudit(cmd.Context(), st, 1, q, fn)
			}
			err = each(func(r audit.Record) error {
				n++
				if format == "json" {
					return arr.add(r)
				}
				fmt.Fprintln(out, audit.Sentence(&r), "["+r.EntryRef+"]")
				return nil
			})
			if err != nil {
				return err
			}
			if format == "json" {
				return arr.end()
			}
			fmt.Fprintf(out, "%d record(s)\n", n)
			return nil
		},
	}
	f := cmd.Flags()
	db.register(f)
	f.StringVar(&q.Entry, "entry", "", "only records about this entry (ref or id)")
	f.StringVar(&q.Actor, "actor", "", "only records by this actor")
	f.StringVar(&q.Action, "action", "", "only records with this action, outcome or kind")
	f.StringVar(&since, "since", "", "only records at or after this time (RFC 3339, or a duration ago such as 24h)")
	f.StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

func parseSince(v string) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageError("--since %q: want RFC 3339 (2026-11-01T00:00:00Z) or a duration (24h)", v)
	}
	return t, nil
}

func newAuditShowCmd(s *streams) *cobra.Command {
	var db dbFlags
	cmd := &cobra.Command{
		Use:   "show DECISION_ID",
		Short: "Show one audit record in full (JSON)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return usageError("decision id %q: want a number, as audit list prints it", args[0])
			}
			rec, err := fetch(cmd.Context(), &db, "/api/audit/"+strconv.FormatUint(seq, 10), nil,
				func(st store.Backend) (audit.Record, error) { return audit.Get(cmd.Context(), st, seq) })
			if errors.Is(err, audit.ErrNotFound) {
				return &exitErr{code: exitUsage, err: err}
			}
			if err != nil {
				return err
			}
			return writeJSON(s.out, rec)
		},
	}
	db.register(cmd.Flags())
	return cmd
}

func newAuditVerifyCmd(s *streams) *cobra.Command {
	var db dbFlags
	var outF, cpFile string
	var archives []string
	cmd := &cobra.Command{
		Use:   "verify [--audit-key-file F] [--checkpoint F] [--archive FILE...]",
		Short: "Walk the hash chain and report the first broken link (exit 1 if broken)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			k, err := db.key.key()
			if err != nil {
				return err
			}
			var cp *audit.Checkpoint
			var q url.Values
			if cpFile != "" {
				if cp, err = readCheckpoint(cpFile); err != nil {
					return err
				}
				q = cp.Query()
			}
			var res *audit.VerifyResult
			if len(archives) > 0 {
				res, err = verifyArchives(cmd, &db, archives, audit.VerifyOptions{Key: k, Checkpoint: cp})
			} else {
				res, err = fetch(cmd.Context(), &db, "/api/audit/verify", q,
					func(st store.Backend) (*audit.VerifyResult, error) {
						return audit.VerifyWith(cmd.Context(), st, audit.VerifyOptions{Key: k, Checkpoint: cp})
					})
			}
			if err != nil {
				return err
			}
			if format == "json" {
				if err := writeJSON(s.out, res); err != nil {
					return err
				}
			} else if res.OK() {
				signed := "head not signed (no key given)"
				if res.Signed {
					signed = "head signature valid"
				}
				if res.Checkpoint {
					signed += ", checkpoint held"
				}
				fmt.Fprintf(s.out, "ok: %d record(s), head %s, %s\n", res.Records, res.Head, signed)
				switch {
				case len(archives) > 0:
					fmt.Fprintf(s.out, "verified end to end: %d archive(s) and the live chain\n", len(archives))
				case res.Pruned != nil:
					fmt.Fprintf(s.out, "pruned: records up to %d are archived; the live chain was verified from that base on (audit verify --archive FILE... checks them too)\n", res.Pruned.Seq)
				}
				for _, u := range res.Unchecked {
					fmt.Fprintf(s.out, "not checked: %s\n", u)
				}
			} else {
				fmt.Fprintf(s.out, "BROKEN: %v (%d record(s) verified before it)\n", res.Break, res.Records)
			}
			if !res.OK() {
				return silent(exitError)
			}
			return nil
		},
	}
	db.register(cmd.Flags())
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	cmd.Flags().StringVar(&cpFile, "checkpoint", "", "checkpoint file from `audit checkpoint`: the chain must still hold it (detects a rollback)")
	cmd.Flags().StringArrayVar(&archives, "archive", nil, "archive written by `store prune`, oldest first (repeatable): verify the archives and the live chain end to end")
	return cmd
}

func newAuditCheckpointCmd(s *streams) *cobra.Command {
	var db dbFlags
	var outF string
	cmd := &cobra.Command{
		Use:   "checkpoint [-o json] > FILE",
		Short: "Print the verified chain head (seq, hash, signature, time) to keep where the store's writers cannot reach",
		Long: `A checkpoint lets a later audit verify --checkpoint FILE detect a chain that was
rolled back to an older head (whose own signature is valid) or replaced. Keep
checkpoints outside the host: a ticket, a log pipeline, object storage with a
retention lock. With an audit key the checkpoint is signed.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			k, err := db.key.key()
			if err != nil {
				return err
			}
			cp, err := fetch(cmd.Context(), &db, "/api/audit/checkpoint", nil,
				func(st store.Backend) (*audit.Checkpoint, error) {
					return audit.NewCheckpoint(cmd.Context(), st, k, time.Now())
				})
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(s.out, cp)
			}
			// The table form is the same JSON on one line: a checkpoint is
			// meant to be kept as a file and read back by verify.
			b, err := json.Marshal(cp)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(s.out, "%s\n", b)
			return err
		},
	}
	db.register(cmd.Flags())
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

func readCheckpoint(path string) (*audit.Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError("read --checkpoint: %v", err)
	}
	var cp audit.Checkpoint
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cp); err != nil || cp.Head == "" {
		return nil, usageError("%s: not a checkpoint from `replayctl audit checkpoint` (%v)", path, err)
	}
	return &cp, nil
}

func newAuditExportCmd(s *streams) *cobra.Command {
	var db dbFlags
	var format string
	cmd := &cobra.Command{
		Use:   "export --format jsonl",
		Short: "Export every record with its chain hashes, one JSON object per line (for a SIEM)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "jsonl" {
				return usageError("unknown --format %q (want jsonl)", format)
			}
			out := bufio.NewWriter(s.out)
			defer out.Flush()
			if db.remote.enabled() {
				return db.remote.stream(cmd.Context(), "/api/audit/export", out)
			}
			key, err := db.key.key()
			if err != nil {
				return err
			}
			st, err := db.openExisting()
			if err != nil {
				return err
			}
			defer st.Close()
			// A broken link ends the export with an error line and a
			// non-zero exit (the lines before it are still written).
			return audit.Export(cmd.Context(), st, out, key)
		},
	}
	db.register(cmd.Flags())
	cmd.Flags().StringVar(&format, "format", "jsonl", "export format (jsonl)")
	return cmd
}

func newAuditExplainCmd(s *streams) *cobra.Command {
	var db dbFlags
	var outF string
	cmd := &cobra.Command{
		Use:   "explain ENTRY_ID [-o json]",
		Short: "Tell the story of one entry: every decision, dispatch, approval and outcome, and why",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			d, err := fetchDetail(cmd.Context(), &db, args[0])
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(s.out, d)
			}
			e := &d.Entry.Entry
			fmt.Fprintf(s.out, "%s (%s) from %s\n", e.Ref(), orDash(e.Topic), orDash(e.Origin))
			fmt.Fprintf(s.out, "failed with %s: %s, after %d attempt(s); idempotency key %s\n\n", orDash(e.ReasonCode), orDash(e.Message), e.Attempts, e.IdempotencyKey)
			for _, r := range d.Decisions {
				fmt.Fprintln(s.out, audit.Sentence(&r))
			}
			if d.Lineage != nil && len(d.Lineage.Members) > 1 {
				fmt.Fprintf(s.out, "\nit came back after replays: %s\n", d.Lineage)
			}
			fmt.Fprintf(s.out, "\nnow: %s", d.Entry.Status)
			if d.Ledger != nil {
				fmt.Fprintf(s.out, ", ledger %s after %d replay(s)", d.Ledger.State, d.Ledger.Replays)
			}
			fmt.Fprintln(s.out)
			return nil
		},
	}
	db.register(cmd.Flags())
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

func newAuditReplayDecisionCmd(s *streams) *cobra.Command {
	var db dbFlags
	var eng engineFlags
	var outF string
	cmd := &cobra.Command{
		Use:   "replay-decision DECISION_ID",
		Short: "Re-run a recorded decision with its recorded inputs and policy snapshot, and compare with today's",
		Long: `replay-decision re-runs triage for a recorded decision with the inputs it
recorded (entry, ledger view) and the exact rules and policy text of its
snapshot, checks that it gives the same decision (deterministic re-evaluation),
and shows what today's rules and policy (--rules, --policies) would decide.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			seq, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return usageError("decision id %q: want a number", args[0])
			}
			// The record and its snapshot come from the file or, with
			// --server, from the API; the re-run and today's rules
			// (--rules, --policies) are always evaluated here.
			rec, err := fetch(cmd.Context(), &db, "/api/audit/"+strconv.FormatUint(seq, 10), nil,
				func(st store.Backend) (audit.Record, error) { return audit.Get(cmd.Context(), st, seq) })
			if err != nil {
				var ee *exitErr
				if errors.As(err, &ee) {
					return err
				}
				return &exitErr{code: exitUsage, err: err}
			}
			if rec.Kind != audit.KindDecision || rec.Decision == nil || rec.Input == nil {
				return usageError("record %d is a %s record, not a decision with recorded inputs", seq, rec.Kind)
			}
			snap, err := fetch(cmd.Context(), &db, "/api/snapshots/"+url.PathEscape(rec.PolicySnapshot), nil,
				func(st store.Backend) (triage.Snapshot, error) {
					var snap triage.Snapshot
					return snap, st.Snapshot(cmd.Context(), rec.PolicySnapshot, &snap)
				})
			if err != nil {
				return fmt.Errorf("policy snapshot %s of record %d: %w", rec.PolicySnapshot, seq, err)
			}
			then, err := policy.EngineFromSnapshot(cmd.Context(), snap, eng.policyTimeout)
			if err != nil {
				return fmt.Errorf("rebuild snapshot %s: %w", snap.ID, err)
			}
			again, err := rec.Rerun(cmd.Context(), then)
			if err != nil {
				return err
			}
			out := map[string]any{"decision_id": seq, "recorded": rec.Decision, "replayed": again,
				"same": sameDecision(rec.Decision, &again)}
			now, _, err := eng.load(cmd.Context())
			if err == nil {
				today, _ := rec.Rerun(cmd.Context(), now) // same record: its inputs were checked above
				out["today"] = today
				out["today_same"] = sameDecision(rec.Decision, &today)
			}
			if format == "json" {
				return writeJSON(s.out, out)
			}
			fmt.Fprintf(s.out, "decision %d for %s, snapshot %s\n", seq, rec.EntryRef, short(snap.ID))
			fmt.Fprintf(s.out, "recorded:            %s (class %s, rule %s)\n", rec.Decision.Action, rec.Decision.Class, rec.Decision.Rule)
			fmt.Fprintf(s.out, "re-run on snapshot:  %s (class %s, rule %s) -> %s\n", again.Action, again.Class, again.Rule, verdict(out["same"].(bool)))
			if t, ok := out["today"].(triage.Decision); ok {
				fmt.Fprintf(s.out, "today's rules:       %s (class %s, rule %s) -> %s\n", t.Action, t.Class, t.Rule, verdict(out["today_same"].(bool)))
			} else {
				fmt.Fprintf(s.out, "today's rules:       not loaded (%v)\n", err)
			}
			if !out["same"].(bool) {
				return silent(exitError)
			}
			return nil
		},
	}
	db.register(cmd.Flags())
	eng.register(cmd.Flags(), s.err)
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

func sameDecision(a, b *triage.Decision) bool {
	return a.Action == b.Action && a.Class == b.Class && a.Rule == b.Rule && a.ProposedAction == b.ProposedAction &&
		a.EvidenceHash == b.EvidenceHash && strings.Join(a.Reasons, "\n") == strings.Join(b.Reasons, "\n")
}

func verdict(same bool) string {
	if same {
		return "same decision"
	}
	return "DIFFERENT"
}

func short(s string) string {
	if len(s) > 19 {
		return s[:19]
	}
	return s
}
