package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
)

func newDLQCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect and handle the entries replayctl has seen (list, show, resolve, release, replay)",
		Long: `dlq works on the entries stored by reconcile, with Nexora's conventions:
list shows open entries by default (--state ALL for every one), resolve marks an
entry handled without replay, release takes it out of quarantine, and replay
reconciles one entry now, still through the policy and the ledger.

IDs are entry refs (KIND:ID, as dlq list prints them) or bare source ids when unique.`,
	}
	cmd.AddCommand(newDLQListCmd(s), newDLQShowCmd(s), newDLQResolveCmd(s), newDLQReleaseCmd(s), newDLQReleaseLineageCmd(s), newDLQReplayCmd(s))
	for _, c := range cmd.Commands() {
		if c.Name() != "list" {
			// Every dlq command but list takes an entry ID; its --db/--server
			// say where to look.
			c.ValidArgsFunction = completeEntriesOf(c)
		}
	}
	return cmd
}

// entryErr maps entry operation errors to exit codes.
func entryErr(err error) error {
	switch {
	case errors.Is(err, replay.ErrNotFound), errors.Is(err, replay.ErrAmbiguous):
		return &exitErr{code: exitUsage, err: err}
	case errors.Is(err, replay.ErrState):
		return &exitErr{code: exitError, err: err}
	}
	return err
}

func newDLQListCmd(s *streams) *cobra.Command {
	var (
		db                             dbFlags
		states, classes, actions, srcs []string
		labels                         []string
		topic, search, cursor          string
		olderThan                      time.Duration
		page, size                     int
		outF                           string
	)
	cmd := &cobra.Command{
		Use:   "list [--state S] [--class C] [--action A] [--source KIND] [--topic GLOB] [--label K=V] [--q TEXT] [--older-than D] [--page N | --cursor C] [--size N] [-o json]",
		Short: "List stored entries (open ones by default)",
		Long: `list shows stored entries, 0-based pages of --size (default 20).
--state takes a status (pending, awaiting_approval, manual_review, quarantined,
replaying, replayed, resolved, failed, outcome_unknown), "open" (the default:
everything not finished) or ALL; it and the other filters may be repeated.
--topic takes a glob as in rules.yaml (orders.* one segment, orders.** any
depth), --q a text searched in ref, id, key, topic
and message, --older-than an age since the last failure (24h; first seen
for an entry without one), as the bulk filters and the console count it. A listing reads
indexes, never payloads; --cursor continues from the "next" a page printed.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			f := replay.Filter{Classes: classes, Actions: actions, Sources: srcs, Topic: topic, Q: search}
			if f.Labels, err = labelFilter(labels); err != nil {
				return err
			}
			if olderThan < 0 {
				return usageError("--older-than must not be negative")
			}
			if olderThan > 0 {
				f.LastFailedBy = time.Now().Add(-olderThan)
			}
			for _, st := range states {
				switch strings.ToLower(st) {
				case "all":
					f.States = nil
				case "open":
					f.States = append(f.States, store.OpenStates()...)
				default:
					if !contains(store.Statuses, strings.ToLower(st)) {
						return usageError("unknown --state %q (want open, ALL or one of %s)", st, strings.Join(store.Statuses, ", "))
					}
					f.States = append(f.States, strings.ToLower(st))
				}
				if strings.EqualFold(st, "all") {
					break
				}
			}
			if len(states) == 0 {
				// Entries that still need something (Nexora lists PENDING by default).
				f.States = store.OpenStates()
			}
			if page < 0 || size < 1 {
				return usageError("--page must be >= 0 and --size >= 1")
			}
			if cursor != "" && cmd.Flags().Changed("page") {
				// A cursor already says where the page starts; a page number
				// beside it would be silently ignored.
				return usageError("--page and --cursor cannot be used together (the cursor says where the page starts)")
			}
			q := url.Values{"state": states, "class": classes, "action": actions, "source": srcs, "label": labels,
				"size": {strconv.Itoa(size)}}
			for k, v := range map[string]string{"topic": topic, "q": search, "cursor": cursor} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if olderThan > 0 {
				q.Set("older_than", olderThan.String())
			}
			if cursor == "" {
				q.Set("page", strconv.Itoa(page))
			}
			p, err := fetch(cmd.Context(), &db, "/api/dead-letters", q,
				func(st store.Backend) (*replay.Page, error) {
					if cursor != "" {
						return replay.ListAfter(cmd.Context(), st, f, cursor, size)
					}
					return replay.List(cmd.Context(), st, f, page, size)
				})
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(s.out, p)
			}
			printEntryTable(s.out, p, cursor != "")
			return nil
		},
	}
	fl := cmd.Flags()
	db.register(fl)
	fl.StringArrayVar(&states, "state", nil, "status filter: open (default), ALL, or a status (repeatable)")
	fl.StringArrayVar(&classes, "class", nil, "class filter (repeatable)")
	fl.StringArrayVar(&actions, "action", nil, "action filter (repeatable)")
	fl.StringArrayVar(&srcs, "source", nil, "source kind filter (repeatable)")
	fl.StringVar(&topic, "topic", "", "topic glob filter, as in rules.yaml (orders.*, orders.**)")
	fl.StringArrayVar(&labels, "label", nil, "label filter KEY=VALUE (repeatable, all must match)")
	fl.StringVar(&search, "q", "", "search text in ref, id, idempotency key, topic and message")
	fl.DurationVar(&olderThan, "older-than", 0, "only entries whose last failure is at least this long ago (e.g. 24h)")
	fl.StringVar(&cursor, "cursor", "", "continue after this cursor (the \"next\" of the previous page)")
	fl.IntVar(&page, "page", 0, "page number, from 0")
	fl.IntVar(&size, "size", 20, "entries per page")
	fl.StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// printEntryTable prints a page and where it sits. A page read after a
// cursor does not know its position (the cursor is a key, not an offset), so
// its footer counts what it shows instead of numbering it from 1.
func printEntryTable(w io.Writer, p *replay.Page, afterCursor bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ENTRY\tCLASS\tACTION\tSTATUS\tOWNER/GROUP\tLAST SEEN\tREASON")
	for _, r := range p.Items {
		who := r.Owner
		if r.Status == store.StatusAwaitingApproval {
			who = r.ApproverGroup
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Entry.Ref(), r.Class, r.Action, r.Status, orDash(who),
			r.LastSeen.Format(time.RFC3339), clip(r.Reason, 70))
	}
	tw.Flush()
	of := strconv.Itoa(p.Total)
	if !p.TotalExact {
		of = "at most " + of
	}
	switch {
	case afterCursor && len(p.Items) == 0:
		fmt.Fprintf(w, "none after the cursor, of %s (size %d)\n", of, p.Size)
	case afterCursor:
		fmt.Fprintf(w, "%d after the cursor, of %s (size %d)\n", len(p.Items), of, p.Size)
	case len(p.Items) == 0:
		fmt.Fprintf(w, "none of %d on page %d (size %d)\n", p.Total, p.Page, p.Size)
	default:
		first := p.Page*p.Size + 1
		fmt.Fprintf(w, "%d-%d of %s (page %d, size %d)\n", first, first+len(p.Items)-1, of, p.Page, p.Size)
	}
	if p.Next != "" {
		fmt.Fprintf(w, "next: --cursor %s\n", p.Next)
	}
}

// fetchDetail reads one entry's detail (dlq show, audit explain) locally or
// through --server's endpoint for it, with the exit code an unknown or
// ambiguous id gets.
func fetchDetail(ctx context.Context, db *dbFlags, id string) (*replay.Detail, error) {
	d, err := fetch(ctx, db, "/api/dead-letters/"+url.PathEscape(id), nil,
		func(st store.Backend) (*replay.Detail, error) { return replay.Show(ctx, st, id) })
	if err != nil {
		return nil, entryErr(err)
	}
	return d, nil
}

func newDLQShowCmd(s *streams) *cobra.Command {
	var db dbFlags
	var outF string
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one entry: its data, failure history, every decision so far and its ledger state",
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
			printDetail(s.out, d)
			return nil
		},
	}
	db.register(cmd.Flags())
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

func printDetail(w io.Writer, d *replay.Detail) {
	e := &d.Entry.Entry
	fmt.Fprintf(w, "entry      %s\norigin     %s\ntopic      %s\nreason     %s  %s\nattempts   %d\nkey        %s\n",
		e.Ref(), e.Origin, orDash(e.Topic), orDash(e.ReasonCode), e.Message, e.Attempts, e.IdempotencyKey)
	fmt.Fprintf(w, "status     %s (class %s, action %s)\n", d.Entry.Status, d.Entry.Class, d.Entry.Action)
	if !d.Entry.NextAttemptAt.IsZero() {
		fmt.Fprintf(w, "next       %s (a retry's due time; an open breaker may hold it longer)\n", d.Entry.NextAttemptAt.UTC().Format(time.RFC3339))
	}
	if d.Entry.Owner != "" {
		fmt.Fprintf(w, "owner      %s\n", d.Entry.Owner)
	}
	if d.Entry.ApprovalID != "" {
		fmt.Fprintf(w, "approval   %s (group %s)\n", d.Entry.ApprovalID, d.Entry.ApproverGroup)
	}
	if d.Ledger != nil {
		fmt.Fprintf(w, "ledger     %s, %d replay(s), updated %s", d.Ledger.State, d.Ledger.Replays, d.Ledger.Updated.Format(time.RFC3339))
		if d.Ledger.LastError != "" {
			fmt.Fprintf(w, ", last: %s", d.Ledger.LastError)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintln(w, "ledger     (no record)")
	}
	printLineage(w, d.Lineage)
	if len(e.History) > 0 {
		fmt.Fprintln(w, "\nfailure history:")
		for _, h := range e.History {
			fmt.Fprintf(w, "  #%d %s %s %s\n", h.Attempt, h.Time.Format(time.RFC3339), orDash(h.ErrorType), h.Message)
		}
	}
	fmt.Fprintln(w, "\ndecisions:")
	for _, r := range d.Decisions {
		what := r.Kind
		if r.Action != "" {
			what += " " + string(r.Action)
		}
		if r.Outcome != "" {
			what += " -> " + r.Outcome
		}
		fmt.Fprintf(w, "  %-6s %s %-12s %s", r.ID(), r.Time.Format(time.RFC3339), r.Actor, what)
		if r.Reason != "" {
			fmt.Fprintf(w, ": %s", r.Reason)
		}
		fmt.Fprintln(w)
	}
}

func newDLQResolveCmd(s *streams) *cobra.Command {
	var db dbFlags
	var actor actorFlag
	var reason, outF string
	var bulk bulkFlags
	cmd := &cobra.Command{
		Use:   "resolve (ID | --filter [filter flags]) --reason TEXT",
		Short: "Mark an entry (or every entry matching a filter) handled, no replay needed",
		Long: `resolve marks an entry handled without replay; later reconciles leave it
resolved. With --filter it resolves every open stored entry matching the filter
flags, after recording the bulk operation in the audit trail; when more than
--confirm-over entries match it only previews unless --yes is given.

--reason is the justification; the reason-code filter is --reason-code.
--filter with no filter flag is refused (exit 2): say --all to mean every entry.`,
		Example: `  replayctl dlq resolve --filter --reason-code schema_invalid --reason 'adapter fixed in 1.4.2' --yes`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := bulk.checkArgs(cmd, args); err != nil {
				return err
			}
			if strings.TrimSpace(reason) == "" {
				return usageError("--reason is required: say why no replay is needed")
			}
			if bulk.filter {
				format, err := outputFormat(outF)
				if err != nil {
					return err
				}
				if db.remote.enabled() {
					return runBulkRemote(cmd, s, &bulk, format, &db.remote, reason)
				}
				st, err := db.open()
				if err != nil {
					return err
				}
				defer st.Close()
				b := &replay.Bulk{Reconciler: &replay.Reconciler{Store: st, Actor: actor.as}, Inventory: st, Max: bulk.max}
				return runBulk(cmd, s, &bulk, format, b, reason)
			}
			er, err := change(cmd.Context(), &db, "/api/dead-letters/"+url.PathEscape(args[0])+"/resolve", map[string]string{"reason": reason},
				func(st store.Backend) (*store.EntryRecord, error) {
					return replay.Resolve(cmd.Context(), st, args[0], actor.as, reason)
				})
			if err != nil {
				return entryErr(err)
			}
			fmt.Fprintf(s.out, "%s resolved (decision %d)\n", er.Entry.Ref(), er.LastDecision)
			return nil
		},
	}
	db.register(cmd.Flags())
	actor.register(cmd.Flags())
	bulk.register(cmd.Flags(), false)
	cmd.Flags().StringVar(&reason, "reason", "", "why no replay is needed (required)")
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

func newDLQReleaseCmd(s *streams) *cobra.Command {
	var db dbFlags
	var actor actorFlag
	var reason, outF string
	cmd := &cobra.Command{
		Use:   "release ID [--reason TEXT] [-o json]",
		Short: "Take an entry out of quarantine; the next reconcile decides it afresh",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			er, err := change(cmd.Context(), &db, "/api/dead-letters/"+url.PathEscape(args[0])+"/release", map[string]string{"reason": reason},
				func(st store.Backend) (*store.EntryRecord, error) {
					return replay.Release(cmd.Context(), st, args[0], actor.as, reason)
				})
			if err != nil {
				return entryErr(err)
			}
			if format == "json" {
				return writeJSON(s.out, er)
			}
			fmt.Fprintf(s.out, "%s released (decision %d); the next reconcile decides it again\n", er.Entry.Ref(), er.LastDecision)
			return nil
		},
	}
	db.register(cmd.Flags())
	actor.register(cmd.Flags())
	cmd.Flags().StringVar(&reason, "reason", "released by operator", "why it is released")
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

// printOne prints a single replay's result; one that dispatched nothing
// says why on stderr and exits 1 (a script must not read "replayed").
func printOne(s *streams, format string, res *replay.EntryResult) error {
	if format == "json" {
		if err := writeJSON(s.out, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(s.out, resultRow, "ENTRY", "CLASS", "ACTION", "STATUS", "WHY")
		printResultRow(s.out, res)
	}
	if err := replay.NothingDone(res); err != nil {
		return &exitErr{code: exitError, err: err}
	}
	return nil
}

func newDLQReplayCmd(s *streams) *cobra.Command {
	var (
		db    dbFlags
		actor actorFlag
		eng   engineFlags
		tgt   targetFlags
		outF  string
	)
	var bulk bulkFlags
	var rate float64
	var par int
	cmd := &cobra.Command{
		Use:   "replay (ID | --filter [filter flags]) [--target URL]",
		Short: "Reconcile one entry (or every entry matching a filter) now, through the policy and the ledger",
		Long: `replay decides one stored entry against the current rules and policy and acts
on the decision, exactly as reconcile would: it replays only if the decision is
auto_replay and the ledger allows it. Quarantined, resolved and replayed entries
are refused (exit 1): release them first.

With --filter it acts on every stored entry matching the filter flags (--class,
--reason-code, --topic, --source, --state, --older-than, --newer-than, --label), not
only one page. It first previews: how many match, how many would be replayed,
and why the others would not (already committed, quarantined, policy denies,
awaits approval, max_replays reached, outcome unknown). When more than
--confirm-over entries match (or with --preview) it stops there unless --yes.
Executing records the bulk operation in the audit trail before any dispatch;
--max caps the replays, --spread spreads them evenly over a duration on top of
--rate. An interrupted operation run again resumes without sending a key twice.
--filter with no filter flag is refused (exit 2): say --all to mean every entry.`,
		Example: `  replayctl dlq replay --filter --class transient --topic 'tool.github.**' --older-than 1h --preview
  replayctl dlq replay --filter --reason-code dependency_unavailable --yes --max 500 --spread 10m --rate 5`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := bulk.checkArgs(cmd, args); err != nil {
				return err
			}
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			if bulk.filter {
				if db.remote.enabled() {
					if tgt.url != "" {
						return usageError("--target with --server: the server's targets apply")
					}
					if bulk.requestApproval {
						return usageError("--request-approval has no --server path yet: run it where the state is (or use --store)")
					}
					return runBulkRemote(cmd, s, &bulk, format, &db.remote, "")
				}
				engine, st, err := openActing(cmd.Context(), &eng, &db)
				if err != nil {
					return err
				}
				defer st.Close()
				if par < 1 {
					return usageError("--max-parallel must be at least 1")
				}
				r := &replay.Reconciler{Engine: engine, Store: st, Router: tgt.router(engine.Rules), Actor: actor.as, Rate: rate, MaxParallel: par,
					ForEntry: forEntry()}
				b := &replay.Bulk{Reconciler: r, Inventory: st, Max: bulk.max, Spread: bulk.spread,
					ResetBudget: bulk.resetBudget, Reason: bulk.reason}
				if bulk.requestApproval {
					return requestPlan(cmd, s, &bulk, format, b)
				}
				return runBulk(cmd, s, &bulk, format, b, "")
			}
			if db.remote.enabled() {
				if tgt.url != "" {
					return usageError("--target with --server: the server's targets apply")
				}
				var res replay.EntryResult
				if err := db.remote.call(cmd.Context(), "POST", "/api/dead-letters/"+url.PathEscape(args[0])+"/replay", nil, nil, &res); err != nil {
					return err
				}
				return printOne(s, format, &res)
			}
			engine, st, err := openActing(cmd.Context(), &eng, &db)
			if err != nil {
				return err
			}
			defer st.Close()
			er, err := replay.Find(cmd.Context(), st, args[0])
			if err != nil {
				return entryErr(err)
			}
			r := &replay.Reconciler{Engine: engine, Store: st, Router: tgt.router(engine.Rules), Actor: actor.as, ForEntry: forEntry()}
			res, err := r.One(cmd.Context(), er)
			if err != nil {
				return entryErr(err)
			}
			return printOne(s, format, &res)
		},
	}
	f := cmd.Flags()
	db.register(f)
	actor.register(f)
	eng.register(f, s.err)
	f.Var(targetURL{&tgt.url}, "target", "send the replay to this URL, overriding rules.yaml targets")
	f.Var(httpURL{&tgt.probe}, "probe", "with --target: URL for compensating reads")
	f.StringVarP(&outF, "output", "o", "table", "output format: table or json")
	f.Float64Var(&rate, "rate", 0, "with --filter: at most this many dispatches per second to each destination")
	f.IntVar(&par, "max-parallel", 5, "with --filter: dispatches at once (1 with --spread)")
	bulk.register(f, true)
	return cmd
}
