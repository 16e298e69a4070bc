package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/replayctl/replayctl/internal/maintenance"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
)

// Intervals of serve's background duties (docs/maintenance.md).
const (
	// recoverEvery: the first sweep runs at start; later ones find only a
	// dispatch of this process whose outcome write failed.
	recoverEvery = 10 * time.Minute
	// sealEvery is the store's own sealer cadence (pg_audit.go): with the
	// writers' rate it bounds the unsealed tail.
	sealEvery = 50 * time.Millisecond
	// remindEvery is how late an aging reminder can be.
	remindEvery = time.Minute
)

// serveDuties lists serve's background duties in start order; the group
// stops them in reverse, so the sealer seals last, after the schedule's
// last run.
type serveDuties struct {
	st       store.Backend
	every    time.Duration
	remind   bool
	pruned   store.Backend
	prune    servePrune
	rules    string
	auditKey []byte
	log      *slog.Logger
}

// build adds the duties to g; srv runs the schedule and the reminders.
func (d serveDuties) build(g *maintenance.Group, srv *server.Server) error {
	o := maintenance.Options{Logger: d.log}
	var errs []error
	add := func(s maintenance.Service, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		g.Add(s)
	}
	ro := o
	ro.Every = recoverEvery
	add(maintenance.NewRecoverer(d.st, "replayctl-recoverer", ro))
	if pg, ok := d.st.(*postgres.Postgres); ok {
		pg.StopOwnSealer() // the duty below seals from now on
		o := o
		o.Every = sealEvery
		add(maintenance.NewAuditSealer(pg, o))
	}
	if d.every > 0 {
		g.Add(maintenance.NewLoop("reconcile-schedule", func(ctx context.Context) {
			srv.Start(ctx).Wait()
			srv.Wait() // a run the schedule started as it stopped
		}))
	}
	if d.remind {
		o := o
		o.Every = remindEvery
		add(maintenance.NewReminders(srv.RemindAging, o))
	}
	if d.pruned != nil {
		o := o
		o.Every = d.prune.every
		add(maintenance.NewRetention(d.pruned, maintenance.Retention{Rules: d.rules, Dir: d.prune.dir, Key: d.auditKey}, o))
	}
	return errors.Join(errs...)
}
