package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/store"
)

// servePrune is serve's retention schedule: every Every, closed entries
// past the rules' retention are pruned into a new archive in Dir (the
// retention duty, internal/maintenance/retention.go).
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
