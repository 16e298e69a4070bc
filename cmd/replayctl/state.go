package main

import (
	"context"
	"net/url"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/triage"
)

// dbFlags is --db (and the audit key) for commands that use the state file.
type dbFlags struct {
	path string
	// writers sizes the bbolt group commit (reconcile: --max-parallel).
	writers int
	dsn     string
	key     auditKeyFlag
	remote  remoteFlags
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
		return f.openPostgres(store.Options{AuditKey: key, MaxBatchSize: f.writers})
	}
	return bolt.Open(f.path, store.Options{AuditKey: key, MaxBatchSize: f.writers})
}

func (f *dbFlags) openPostgres(o store.Options) (store.Backend, error) {
	if !strings.HasPrefix(f.dsn, "postgres://") && !strings.HasPrefix(f.dsn, "postgresql://") {
		return nil, usageError("--store %q: want a postgres:// URL", f.dsn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return postgres.Open(ctx, f.dsn, o)
}

// openExisting opens for reading and fails clearly when there is no state yet.
func (f *dbFlags) openExisting() (store.Backend, error) {
	if f.dsn != "" {
		return f.openPostgres(store.Options{})
	}
	if _, err := os.Stat(f.path); err != nil {
		return nil, usageError("no state file %s: run `replayctl reconcile` first, or pass --db", f.path)
	}
	return bolt.Open(f.path, store.Options{ReadOnly: true})
}

// actorFlag is the explicit identity recorded in the audit trail.
type actorFlag struct{ as string }

func (f *actorFlag) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.as, "as", defaultActor(), "who is acting, as recorded in the audit trail")
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

// fetch reads through the server (--server) or from the state opened
// read-only: one code path for both modes, so their output is the same.
func fetch[T any](ctx context.Context, db *dbFlags, path string, q url.Values, local func(store.Backend) (T, error)) (T, error) {
	var out T
	if db.remote.enabled() {
		return out, db.remote.call(ctx, "GET", path, q, nil, &out)
	}
	st, err := db.openExisting()
	if err != nil {
		return out, err
	}
	defer st.Close()
	return local(st)
}

// change posts to the server (--server) or applies the change to the
// state opened for writing.
func change[T any](ctx context.Context, db *dbFlags, path string, body any, local func(store.Backend) (T, error)) (T, error) {
	var out T
	if db.remote.enabled() {
		return out, db.remote.call(ctx, "POST", path, nil, body, &out)
	}
	st, err := db.open()
	if err != nil {
		return out, err
	}
	defer st.Close()
	return local(st)
}

// openActing loads the rules and policy, opens the state for writing and
// keeps the snapshot's text (so decisions can be re-run later): what every
// command that decides and acts does first. The caller closes the store.
func openActing(ctx context.Context, eng *engineFlags, db *dbFlags) (*triage.Engine, store.Backend, error) {
	engine, snap, err := eng.load(ctx)
	if err != nil {
		return nil, nil, err
	}
	st, err := db.open()
	if err != nil {
		return nil, nil, err
	}
	if err := st.PutSnapshot(ctx, snap.ID, snap); err != nil {
		st.Close()
		return nil, nil, err
	}
	return engine, st, nil
}
