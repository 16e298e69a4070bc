package main

import (
	"context"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/store"
)

// dbFlags is --db (and the audit key) for commands that use the state file.
type dbFlags struct {
	path   string
	dsn    string
	key    auditKeyFlag
	remote remoteFlags
}

func (f *dbFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.path, "db", "replayctl.db", "state file (bbolt): ledger, entries, approvals, audit trail")
	fs.StringVar(&f.dsn, "store", os.Getenv("REPLAYCTL_STORE"), "shared state in PostgreSQL (postgres://...) instead of --db, for many workers (or REPLAYCTL_STORE)")
	f.key.register(fs)
	f.remote.register(fs)
}

// open opens the state for writing: PostgreSQL with --store, else the
// bbolt file. With an audit key every append re-signs the chain head.
func (f *dbFlags) open() (store.Backend, error) {
	key, err := f.key.key()
	if err != nil {
		return nil, err
	}
	if f.dsn != "" {
		return f.openPostgres(store.Options{AuditKey: key})
	}
	return store.OpenBolt(f.path, store.Options{AuditKey: key})
}

func (f *dbFlags) openPostgres(o store.Options) (store.Backend, error) {
	if !strings.HasPrefix(f.dsn, "postgres://") && !strings.HasPrefix(f.dsn, "postgresql://") {
		return nil, usageError("--store %q: want a postgres:// URL", f.dsn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return store.OpenPostgres(ctx, f.dsn, o)
}

// openExisting opens for reading and fails clearly when there is no state yet.
func (f *dbFlags) openExisting() (store.Backend, error) {
	if f.dsn != "" {
		return f.openPostgres(store.Options{})
	}
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
