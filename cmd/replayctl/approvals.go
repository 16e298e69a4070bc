package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
)

type approversFlag struct{ path string }

func (f *approversFlag) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.path, "approvers", "approvers.yaml", "approver groups and their members (see README)")
}

func newApprovalsCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List and decide approval requests (four-eyes, bound to their evidence)",
		Long: `Replays that need a person (require_approval) open an approval request for the
rule's approver group. Members of the group (approvers.yaml) approve or reject
it; nobody decides a request they raised; a request is decided once; it expires
(default 24h); and it is bound to a hash of its evidence (entry, class, rule,
policy snapshot): if any of that changed, it is stale and reconcile asks again.
An approved replay runs at the next reconcile (or now, with --replay-now), still
through the ledger and the current policy.`,
	}
	cmd.AddCommand(newApprovalsListCmd(s), newApprovalsDecideCmd(s, true), newApprovalsDecideCmd(s, false), newApprovalsRerequestCmd(s))
	return cmd
}

func newApprovalsListCmd(s *streams) *cobra.Command {
	var (
		db           dbFlags
		group, state string
		outF         string
	)
	cmd := &cobra.Command{
		Use:   "list [--group G] [--state pending|approved|rejected|expired|stale|ALL] [-o json]",
		Short: "List approval requests with their evidence and age",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			if strings.EqualFold(state, "all") {
				state = "" // as in `dlq list --state ALL`
			}
			switch state {
			case "", store.ApprovalPending, store.ApprovalApproved, store.ApprovalRejected, store.ApprovalExpired, store.ApprovalStale:
			default:
				return usageError("unknown --state %q (want pending, approved, rejected, expired, stale or ALL)", state)
			}
			q := url.Values{}
			if group != "" {
				q.Set("group", group)
			}
			if state != "" {
				q.Set("state", state)
			}
			list, err := fetch(cmd.Context(), &db, "/api/approvals", q, func(st store.Backend) ([]approval.View, error) {
				svc := &approval.Service{Store: st, Config: &approval.Config{}}
				return svc.List(cmd.Context(), approval.Filter{Group: group, State: state})
			})
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(s.out, list)
			}
			printApprovals(s.out, list)
			return nil
		},
	}
	db.register(cmd.Flags())
	cmd.Flags().StringVar(&group, "group", "", "only this approver group")
	cmd.Flags().StringVar(&state, "state", "", "only this state: pending, approved, rejected, expired, stale, or ALL (the default)")
	cmd.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")
	return cmd
}

func printApprovals(w io.Writer, list []approval.View) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tENTRY\tCLASS\tGROUP\tSTATE\tAGE\tRULE\tWHY")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.EntryRef, a.Decision.Class, orDash(a.ApproverGroup),
			a.State, a.Age, a.Decision.Rule, clip(lastOf(a.Decision.Reasons), 70))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d request(s)\n", len(list))
}

func newApprovalsDecideCmd(s *streams, approve bool) *cobra.Command {
	var (
		db        dbFlags
		actor     actorFlag
		approvers approversFlag
		eng       engineFlags
		tgt       targetFlags
		reason    string
		replayNow bool
		outF      string
	)
	use, short := "approve ID [--as USER] [--reason TEXT] [--replay-now]", "Approve a request (a member of its group, not its requester)"
	if !approve {
		use, short = "reject ID --reason TEXT [--as USER]", "Reject a request (a member of its group, not its requester)"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !approve && reason == "" {
				return usageError("--reason is required to reject")
			}
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			if db.remote.enabled() {
				verb := map[bool]string{true: "approve", false: "reject"}[approve]
				var res store.Approval
				if err := db.remote.call(cmd.Context(), "POST", "/api/approvals/"+url.PathEscape(args[0])+"/"+verb, nil,
					map[string]string{"reason": reason}, &res); err != nil {
					return err
				}
				var one *replay.EntryResult
				if replayNow {
					one = &replay.EntryResult{}
					if err := db.remote.call(cmd.Context(), "POST", "/api/dead-letters/"+url.PathEscape(res.EntryRef)+"/replay", nil, nil, one); err != nil {
						// The decision stands: say so, as the local path
						// does, or a refused replay reads as a refused
						// approval.
						fmt.Fprintf(s.out, "%s %s by %s\n", res.ID, res.State, res.DecidedBy)
						return err
					}
				}
				return printDecided(s, format, &res, one)
			}
			cfg, err := approval.LoadConfig(approvers.path)
			if err != nil {
				return err
			}
			engine, st, err := openActing(cmd.Context(), &eng, &db)
			if err != nil {
				return err
			}
			defer st.Close()
			// The evidence now: the entry decided against today's rules and
			// policy. An approval of other evidence would be stale.
			var current string
			var a *store.Approval
			if err := st.View(cmd.Context(), func(tx store.Tx) error {
				a, err = tx.Approval(args[0])
				return err
			}); err != nil {
				return err
			}
			var er *store.EntryRecord
			if a != nil {
				if er, err = replay.Find(cmd.Context(), st, a.EntryRef); err == nil {
					planner := &replay.Planner{Engine: engine, Ledger: st}
					d, err := planner.DecideStored(cmd.Context(), er)
					if err != nil {
						return err
					}
					current = d.EvidenceHash
				}
			}
			router := tgt.router(engine.Rules)
			if approve && replayNow && er != nil {
				// Decided first and then sent nowhere, the approval was
				// spent: the entry fell to manual review ("no target") and
				// a second try with --target was refused as already
				// decided (issue 30). Without a target nothing is decided.
				if _, ok := router.Route(&er.Entry); !ok {
					return usageError("--replay-now: entry %s has no replay target (give --target URL, or a targets: entry in rules.yaml that matches it): nothing approved, request %s stays pending", er.Entry.Ref(), args[0])
				}
			}
			svc := &approval.Service{Store: st, Config: cfg}
			res, err := svc.Decide(cmd.Context(), approval.Decision{ID: args[0], Actor: actor.as, Approve: approve, Reason: reason, CurrentEvidence: current})
			if err != nil {
				return approvalErr(err)
			}
			var one *replay.EntryResult
			if approve && replayNow && er != nil {
				r := &replay.Reconciler{Engine: engine, Store: st, Router: router, Actor: actor.as, ForEntry: forEntry()}
				out, err := r.One(cmd.Context(), er)
				if err != nil {
					fmt.Fprintf(s.out, "%s %s by %s\n", res.ID, res.State, res.DecidedBy)
					return entryErr(err)
				}
				one = &out
			}
			return printDecided(s, format, res, one)
		},
	}
	f := cmd.Flags()
	db.register(f)
	actor.register(f)
	approvers.register(f)
	eng.register(f, s.err)
	f.StringVar(&reason, "reason", "", "why (required to reject)")
	f.StringVarP(&outF, "output", "o", "table", "output format: table or json")
	if approve {
		f.BoolVar(&replayNow, "replay-now", false, "replay the entry at once instead of at the next reconcile")
		f.Var(targetURL{&tgt.url}, "target", "with --replay-now: send the replay to this URL")
	}
	return cmd
}

// approvalErr maps workflow errors to exit codes: refusals are 1, as a
// conflict or a forbidden call is in the API (409/403).
func approvalErr(err error) error {
	switch {
	case errors.Is(err, approval.ErrNotFound):
		return &exitErr{code: exitUsage, err: err}
	case errors.Is(err, approval.ErrForbidden), errors.Is(err, approval.ErrSelfApproval),
		errors.Is(err, approval.ErrDecided), errors.Is(err, approval.ErrStale), errors.Is(err, approval.ErrExpired):
		return &exitErr{code: exitError, err: err}
	}
	return err
}

// printDecided shows a decided request and, with --replay-now, the replay.
// JSON: {"approval": {...}, "replay": {...}}.
func printDecided(s *streams, format string, a *store.Approval, one *replay.EntryResult) error {
	if format == "json" {
		if err := writeJSON(s.out, struct {
			Approval *store.Approval     `json:"approval"`
			Replay   *replay.EntryResult `json:"replay,omitempty"`
		}{a, one}); err != nil {
			return err
		}
		if err := replay.NothingDone(one); err != nil {
			return &exitErr{code: exitError, err: err}
		}
		return nil
	}
	fmt.Fprintf(s.out, "%s %s by %s\n", a.ID, a.State, a.DecidedBy)
	if one != nil {
		return printOne(s, "table", one)
	}
	return nil
}
