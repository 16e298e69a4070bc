package main

import (
	"os"
	"os/user"

	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/store"
)

// dbFlags is --db (and the audit key) for commands that use the state file.
type dbFlags struct {
	path   string
	key    auditKeyFlag
	remote remoteFlags
}

func (f *dbFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.path, "db", "replayctl.db", "state file (bbolt): ledger, entries, approvals, audit trail")
	f.key.register(fs)
	f.remote.register(fs)
}

// open opens the state file for writing; with an audit key every append
// re-signs the audit chain head.
func (f *dbFlags) open() (*store.Bolt, error) {
	key, err := f.key.key()
	if err != nil {
		return nil, err
	}
	return store.OpenBolt(f.path, store.Options{AuditKey: key})
}

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
