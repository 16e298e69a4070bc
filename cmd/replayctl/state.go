package main

import (
	"os"
	"os/user"

	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/store"
)

// dbFlags is --db for commands that change state.
type dbFlags struct{ path string }

func (f *dbFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.path, "db", "replayctl.db", "state file (bbolt): ledger, entries, approvals, audit trail")
}

func (f *dbFlags) open() (*store.Bolt, error) { return store.OpenBolt(f.path, store.Options{}) }

// openExisting opens for reading and fails clearly when there is no state yet.
func (f *dbFlags) openExisting() (*store.Bolt, error) {
	if _, err := os.Stat(f.path); err != nil {
		return nil, usageError("no state file %s: run `replayctl reconcile` first, or pass --db", f.path)
	}
	return store.OpenBolt(f.path, store.Options{ReadOnly: true})
}

// actorFlag is the explicit identity recorded in the audit trail.
type actorFlag struct{ as string }

func (f *actorFlag) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.as, "as", defaultActor(), "who is acting, as recorded in the audit trail (default: the OS user)")
}

func defaultActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}
