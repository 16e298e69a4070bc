package main

import (
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
)

// newApprovalsRerequestCmd asks again for an approval whose request
// expired, at once rather than at the next reconcile (issue 14: an entry
// must always end where a person can act).
func newApprovalsRerequestCmd(s *streams) *cobra.Command {
	var (
		db        dbFlags
		actor     actorFlag
		approvers approversFlag
	)
	cmd := &cobra.Command{
		Use:   "rerequest ID [--as USER]",
		Short: "Ask again for an approval whose request expired (new id, open for approvers.yaml's expiry)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var cfg *approval.Config
			if db.remote.enabled() && cmd.Flags().Changed("approvers") {
				return usageError("--approvers with --server: the server's approvers.yaml applies")
			}
			if !db.remote.enabled() {
				// Through the server, the server's approvers.yaml applies.
				var err error
				if cfg, err = approval.LoadConfig(approvers.path); err != nil {
					return err
				}
			}
			a, err := change(cmd.Context(), &db, "/api/approvals/"+url.PathEscape(args[0])+"/rerequest", struct{}{},
				func(st store.Backend) (*store.Approval, error) {
					return replay.Rerequest(cmd.Context(), st, args[0], actor.as, time.Now().UTC(), cfg.Expiry)
				})
			if err != nil {
				return entryErr(err)
			}
			fmt.Fprintf(s.out, "%s pending for %s (replaces %s), expires %s\n", a.ID, a.ApproverGroup, args[0], a.ExpiresAt.Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	db.register(f)
	actor.register(f)
	approvers.register(f)
	return cmd
}
