package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// servePrune is serve's retention schedule: every Every, closed entries
// past the rules' retention are pruned into a new archive in Dir.
type servePrune struct {
	every time.Duration
	dir   string
}

func (p *servePrune) register(f *pflag.FlagSet) {
	f.Var(periodFlag{&p.every}, "prune-every", "prune closed entries past rules.yaml's retention this often, e.g. 1d (0: never; needs --prune-archive-dir)")
	f.StringVar(&p.dir, "prune-archive-dir", "", "directory the scheduled prunes write their archives to (one new file each)")
}

// check validates the flags against the store serve opened.
func (p *servePrune) check(st store.Backend) (store.Backend, error) {
	switch {
	case p.every < 0:
		return nil, usageError("--prune-every must not be negative")
	case p.every == 0 && p.dir == "":
		return nil, nil
	case p.every == 0 || p.dir == "":
		return nil, usageError("--prune-every and --prune-archive-dir go together")
	}
	return st, nil
}

// start runs the schedule until ctx ends; wait for the returned group.
func (p *servePrune) start(ctx context.Context, st store.Backend, rulesPath string, key []byte, log *slog.Logger) *sync.WaitGroup {
	var wg sync.WaitGroup
	if st == nil {
		return &wg
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				res, err := pruneOnce(ctx, st, rulesPath, p.dir, key, now)
				switch {
				case err != nil:
					log.Error("scheduled prune failed; it is finished by the next one", "err", err)
				case res.Entries+res.Audit+res.Approvals > 0:
					log.Info("scheduled prune", "archive", res.Archive, "entries", res.Entries, "audit_records", res.Audit,
						"approvals", res.Approvals, "resumed", res.Resumed)
				}
			}
		}
	}()
	return &wg
}

// pruneOnce prunes what the rules' retention (read now, as every run reads
// them) lets go, into a new archive named for the time.
func pruneOnce(ctx context.Context, st store.Backend, rulesPath, dir string, key []byte, now time.Time) (*store.PruneResult, error) {
	keep := triage.DefaultClosedRetention
	if r, _, err := triage.LoadRules(rulesPath); err == nil {
		keep = r.Retention.ClosedFor()
	} else {
		return nil, fmt.Errorf("rules: %w", err)
	}
	archive := filepath.Join(dir, "replayctl-"+now.UTC().Format("20060102T150405.000000000Z")+".jsonl.gz")
	return st.Prune(ctx, store.PruneOptions{Before: now.Add(-keep), Archive: archive, Key: key})
}
