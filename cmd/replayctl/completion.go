package main

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// sourceKinds are the KIND of --source KIND:PATH.
func sourceKinds() []string { return []string{"cordum", "cordum-redis", "prodigy", "nexora", "jsonl"} }

// maxCompletions caps the entry ids offered: a shell menu of a whole DLQ
// helps nobody, and completion must answer fast.
const maxCompletions = 200

// completeEntries offers stored entry refs for a command's ID argument,
// read from the state file (read-only) or, with --server, from the API.
func completeEntries(db *dbFlags) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		page, err := fetch(ctx, db, "/api/dead-letters", url.Values{"state": {"ALL"}, "size": {"200"}},
			func(st store.Backend) (*replay.Page, error) {
				return replay.List(ctx, st, replay.Filter{States: store.Statuses}, 0, maxCompletions)
			})
		if err != nil || page == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, er := range page.Items {
			if ref := er.Entry.Ref(); strings.HasPrefix(ref, toComplete) {
				out = append(out, ref+"\t"+er.Status)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// registerCompletions walks the command tree and completes the flags that
// take a state, a class or a source wherever they appear.
func registerCompletions(c *cobra.Command) {
	fixed := func(vals ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return vals, cobra.ShellCompDirectiveNoFileComp
		}
	}
	classes := make([]string, 0, len(triage.Classes))
	for _, cl := range triage.Classes {
		classes = append(classes, string(cl))
	}
	if f := c.Flags().Lookup("state"); f != nil {
		states := append([]string{"ALL"}, store.Statuses...)
		if c.Parent() != nil && c.Parent().Name() == "approvals" {
			states = []string{"ALL", store.ApprovalPending, store.ApprovalApproved, store.ApprovalRejected, store.ApprovalExpired, store.ApprovalStale}
		}
		_ = c.RegisterFlagCompletionFunc("state", fixed(states...))
	}
	if c.Flags().Lookup("class") != nil {
		_ = c.RegisterFlagCompletionFunc("class", fixed(classes...))
	}
	if c.Flags().Lookup("source") != nil {
		// A filter takes a kind (dlq list, bulk); reading takes KIND:PATH,
		// so there the kind is offered with its colon and no space after.
		if c.Name() == "plan" || c.Name() == "reconcile" || c.Name() == "serve" {
			kinds := sourceKinds()
			for i, k := range kinds {
				kinds[i] = k + ":"
			}
			_ = c.RegisterFlagCompletionFunc("source", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return kinds, cobra.ShellCompDirectiveNoSpace
			})
		} else {
			_ = c.RegisterFlagCompletionFunc("source", fixed(sourceKinds()...))
		}
	}
	for _, sub := range c.Commands() {
		registerCompletions(sub)
	}
}

// completeEntriesOf completes entry IDs for c, reading where c's own
// --db, --store or --server flags point (their values at completion time).
func completeEntriesOf(c *cobra.Command) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		db := &dbFlags{}
		db.path, _ = cmd.Flags().GetString("db")
		db.dsn, _ = cmd.Flags().GetString("store")
		db.remote.url, _ = cmd.Flags().GetString("server")
		db.remote.token, _ = cmd.Flags().GetString("token")
		return completeEntries(db)(cmd, args, toComplete)
	}
}
