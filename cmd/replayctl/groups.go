package main

import (
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
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/store"
)

// newGroupsCmd: failure groups, and what people decided about them.
func newGroupsCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "Failure groups: entries failing the same way (list, show, ack, hold, release)",
		Long: `Every entry belongs to a failure group: its source, topic, class and error with
the parts that vary (numbers, ids, hex, UUIDs, timestamps, quoted values)
masked, and the top frames of a stack when the message has one. An incident
that fills the DLQ with thousands of entries shows as a few groups.

A group is open, acknowledged (someone is on it: --note), held (every current
and future entry of the group waits, with a reason and an optional --until;
an expired hold is audited and the group opens again) or resolved. Act on a
whole group with dlq replay --group G and dlq resolve --group G --reason, which
preview first like every bulk operation. Every change is an audit record.`,
	}
	cmd.AddCommand(newGroupsListCmd(s), newGroupsShowCmd(s), newGroupsAckCmd(s), newGroupsHoldCmd(s), newGroupsReleaseCmd(s))
	return cmd
}

func groupStore(st store.Backend) replay.GroupStore { return st }

func groupsErr(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrBadGroup):
		return &exitErr{code: exitUsage, err: err}
	case errors.Is(err, replay.ErrGroupState):
		return &exitErr{code: exitError, err: err}
	}
	return err
}

func newGroupsListCmd(s *streams) *cobra.Command {
	var db dbFlags
	var outF string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--limit N] [-o json]",
		Short: "List failure groups, largest open count first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			if limit < 0 {
				return usageError("--limit must be 0 (all) or more")
			}
			l, err := fetch(cmd.Context(), &db, "/api/groups", url.Values{"limit": {strconv.Itoa(limit)}}, func(st store.Backend) (server.GroupList, error) {
				gs, err := (&replay.Groups{Store: groupStore(st)}).List(cmd.Context(), limit)
				return server.GroupList{Items: gs}, err
			})
			if err != nil {
				return groupsErr(err)
			}
			if format == "json" {
				return writeJSON(s.out, l)
			}
			printGroups(s.out, l.Items, time.Now())
			return nil
		},
	}
	db.register(cmd.Flags())
	cmd.Flags().IntVar(&limit, "limit", 20, "how many groups, largest open count first (0: all)")
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

// since says how long ago t was, coarsely.
func since(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func printGroups(w io.Writer, gs []store.GroupSummary, now time.Time) {
	if len(gs) == 0 {
		fmt.Fprintln(w, "no failure groups: the DLQ is empty")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSTATE\tOPEN\tTOTAL\t1H\t24H\tFIRST\tLAST\tCLASS\tSOURCE/TOPIC\tERROR\tSAMPLE")
	for _, g := range gs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.State, g.Open, g.Total, g.LastHour, g.LastDay,
			since(g.First, now), since(g.Last, now), orDash(g.Key.Class), g.Key.Source+"/"+orDash(g.Key.Topic), cut(g.Key.Error, 60), orDash(g.Sample))
	}
	tw.Flush()
	held := 0
	for _, g := range gs {
		if g.State == store.GroupHeld {
			held++
		}
	}
	if held > 0 {
		fmt.Fprintf(w, "%d group(s) held: their entries wait (groups show GROUP says why and until when)\n", held)
	}
}

func newGroupsShowCmd(s *streams) *cobra.Command {
	var db dbFlags
	var outF string
	cmd := &cobra.Command{
		Use:   "show GROUP [-o json]",
		Short: "Show one failure group: its signature, counts, trend, sample and lifecycle",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			g, err := fetch(cmd.Context(), &db, "/api/groups/"+url.PathEscape(args[0]), nil, func(st store.Backend) (*store.GroupSummary, error) {
				return (&replay.Groups{Store: groupStore(st)}).Show(cmd.Context(), args[0])
			})
			if err != nil {
				return groupsErr(err)
			}
			if format == "json" {
				return writeJSON(s.out, g)
			}
			printGroup(s.out, g, time.Now())
			return nil
		},
	}
	db.register(cmd.Flags())
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

func printGroup(w io.Writer, g *store.GroupSummary, now time.Time) {
	fmt.Fprintf(w, "group      %s\nstate      %s\n", g.ID, g.State)
	if lc := g.Lifecycle; lc != nil {
		fmt.Fprintf(w, "changed    %s by %s (audit record %d)\n", lc.At.UTC().Format(time.RFC3339), orDash(lc.By), lc.AuditSeq)
		if lc.Note != "" {
			fmt.Fprintf(w, "note       %s\n", lc.Note)
		}
		if lc.Reason != "" {
			fmt.Fprintf(w, "reason     %s\n", lc.Reason)
		}
		if !lc.Until.IsZero() {
			fmt.Fprintf(w, "until      %s\n", lc.Until.UTC().Format(time.RFC3339))
		}
	}
	fmt.Fprintf(w, "source     %s\ntopic      %s\nclass      %s\nerror      %s\n", g.Key.Source, orDash(g.Key.Topic), orDash(g.Key.Class), g.Key.Error)
	fmt.Fprintf(w, "entries    %d open of %d\ninflow     %d in the last hour, %d in the last day\n", g.Open, g.Total, g.LastHour, g.LastDay)
	fmt.Fprintf(w, "first seen %s\nlast seen  %s\n", since(g.First, now), since(g.Last, now))
	fmt.Fprintf(w, "sample     %s  %s\n", orDash(g.Sample), g.SampleMessage)
	var b strings.Builder
	for _, n := range g.Hourly {
		b.WriteString(spark(n, g.Hourly))
	}
	fmt.Fprintf(w, "trend 24h  %s\n", b.String())
	fmt.Fprintf(w, "act        replayctl dlq replay --group %s --preview\n", g.ID)
}

// spark draws n on a scale of the largest of all.
func spark(n int64, all []int64) string {
	bars := []string{"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"}
	var top int64
	for _, v := range all {
		top = max(top, v)
	}
	if n == 0 || top == 0 {
		return "·"
	}
	return bars[int((n*int64(len(bars)-1))/top)]
}

// groupChange applies one lifecycle change, locally or through --server.
func groupChange(cmd *cobra.Command, s *streams, db *dbFlags, actor *actorFlag, outF, id, verb string, body server.GroupChange,
	local func(*replay.Groups) (*store.GroupState, error)) error {
	format, err := outputFormat(outF)
	if err != nil {
		return err
	}
	st, err := change(cmd.Context(), db, "/api/groups/"+url.PathEscape(id)+"/"+verb, body, func(st store.Backend) (*store.GroupState, error) {
		return local(&replay.Groups{Store: groupStore(st), Actor: actor.as})
	})
	if err != nil {
		return groupsErr(err)
	}
	if format == "json" {
		return writeJSON(s.out, st)
	}
	fmt.Fprintf(s.out, "group %s: %s (audit record %d)\n", st.ID, st.State, st.AuditSeq)
	if st.State == store.GroupHeld {
		until := "released (groups release " + st.ID + ")"
		if !st.Until.IsZero() {
			until = st.Until.UTC().Format(time.RFC3339) + " or released"
		}
		fmt.Fprintf(s.out, "every current and future entry of the group waits until %s\n", until)
	}
	return nil
}

func newGroupsAckCmd(s *streams) *cobra.Command {
	var db dbFlags
	var actor actorFlag
	var outF, note string
	cmd := &cobra.Command{
		Use:   "ack GROUP --note TEXT",
		Short: "Acknowledge a group: someone is on it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(note) == "" {
				return usageError("groups ack needs --note TEXT (who is on it, what is known)")
			}
			return groupChange(cmd, s, &db, &actor, outF, args[0], "ack", server.GroupChange{Note: note},
				func(g *replay.Groups) (*store.GroupState, error) { return g.Ack(cmd.Context(), args[0], note) })
		},
	}
	db.register(cmd.Flags())
	actor.register(cmd.Flags())
	cmd.Flags().StringVar(&note, "note", "", "who is on it, what is known")
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

// parseUntil reads --until: an RFC 3339 time or a duration from now.
func parseUntil(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, usageError("--until %q: a duration must be positive", v)
		}
		return now.Add(d).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageError("--until %q: want a time (2026-11-27T18:00:00Z) or a duration (4h)", v)
	}
	return t.UTC(), nil
}

func newGroupsHoldCmd(s *streams) *cobra.Command {
	var db dbFlags
	var actor actorFlag
	var outF, reason, until string
	cmd := &cobra.Command{
		Use:   "hold GROUP --reason TEXT [--until TIME|DURATION]",
		Short: "Hold a group: every current and future entry of it waits, until --until or a release",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageError("groups hold needs --reason TEXT (what it waits for: \"payments fix deploys\")")
			}
			u, err := parseUntil(until, time.Now())
			if err != nil {
				return err
			}
			return groupChange(cmd, s, &db, &actor, outF, args[0], "hold", server.GroupChange{Reason: reason, Until: u},
				func(g *replay.Groups) (*store.GroupState, error) { return g.Hold(cmd.Context(), args[0], reason, u) })
		},
	}
	db.register(cmd.Flags())
	actor.register(cmd.Flags())
	cmd.Flags().StringVar(&reason, "reason", "", "why the group waits (recorded in the audit trail)")
	cmd.Flags().StringVar(&until, "until", "", "when the hold ends by itself: a time (RFC 3339) or a duration from now; none: until released")
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

func newGroupsReleaseCmd(s *streams) *cobra.Command {
	var db dbFlags
	var actor actorFlag
	var outF, reason string
	cmd := &cobra.Command{
		Use:   "release GROUP [--reason TEXT]",
		Short: "End a group's hold: the next reconcile decides its entries afresh",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return groupChange(cmd, s, &db, &actor, outF, args[0], "release", server.GroupChange{Reason: reason},
				func(g *replay.Groups) (*store.GroupState, error) { return g.Release(cmd.Context(), args[0], reason) })
		},
	}
	db.register(cmd.Flags())
	actor.register(cmd.Flags())
	cmd.Flags().StringVar(&reason, "reason", "", "why the hold ends (recorded in the audit trail)")
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}
