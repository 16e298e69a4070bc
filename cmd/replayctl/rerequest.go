package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/replay"
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
			if db.remote.enabled() {
				return usageError("approvals rerequest works on the local store only; the server's reconcile asks again by itself")
			}
			cfg, err := approval.LoadConfig(approvers.path)
			if err != nil {
				return err
			}
			st, err := db.open()
			if err != nil {
				return err
			}
			defer st.Close()
			a, err := replay.Rerequest(cmd.Context(), st, args[0], actor.as, time.Now().UTC(), cfg.Expiry)
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
