package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/triage"
)

// engineFlags are the flags every deciding command shares.
type engineFlags struct {
	rules         string
	policies      string
	policyTimeout time.Duration
	// flags tell a flag given (or set from the environment or a config
	// file) from one left at its default; notes get the one line saying
	// that the built-in rules or policy are used (defaults.go).
	flags *pflag.FlagSet
	notes io.Writer
	noted sync.Once
}

func (f *engineFlags) register(fs *pflag.FlagSet, notes io.Writer) {
	f.flags, f.notes = fs, notes
	fs.StringVar(&f.rules, "rules", "rules.yaml", "rules file")
	fs.StringVar(&f.policies, "policies", "policies", "directory of Rego policies (*.rego; *_test.rego are tests)")
	fs.DurationVar(&f.policyTimeout, "policy-timeout", policy.DefaultTimeout, "time limit of one policy evaluation; past it the decision fails closed")
}

// load builds the engine with the wall clock as its decision time (the
// edge where time is injected: a target's key_lifetime is judged by it).
func (f *engineFlags) load(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
	br, bp := f.builtinRules(), f.builtinPolicies()
	var (
		eng  *triage.Engine
		snap triage.Snapshot
		err  error
	)
	if !br && !bp {
		eng, snap, err = policy.LoadEngine(ctx, f.rules, f.policies, f.policyTimeout)
	} else {
		eng, snap, err = f.loadBuiltin(ctx, br, bp)
	}
	if eng != nil {
		eng.Now = time.Now
	}
	return eng, snap, err
}

// sourceFlags is the repeatable --source KIND:PATH flag.
type sourceFlags struct{ specs []string }

func (f *sourceFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.specs, "source", nil, "a DLQ to read, as KIND:PATH (repeatable); KIND is cordum, cordum-redis, prodigy, nexora, jsonl, rabbitmq, kafka or sqs")
}

// open parses the sources; a live source's retries are logged on log, so a
// system that is down does not look like a hung command.
func (f *sourceFlags) open(log *slog.Logger) ([]source.Source, error) {
	if len(f.specs) == 0 {
		return nil, usageError("no --source given\nExample: --source cordum:testdata/cordum/dlq.jsonl")
	}
	out := make([]source.Source, 0, len(f.specs))
	for _, spec := range f.specs {
		s, err := source.Parse(spec)
		if err == nil {
			err = source.CheckKind(context.Background(), spec)
		}
		if err != nil {
			return nil, &exitErr{code: exitUsage, err: err}
		}
		if r, ok := s.(interface{ OnRetry(func(string)) }); ok && log != nil {
			r.OnRetry(func(msg string) { log.Warn(msg) })
		}
		out = append(out, s)
	}
	return out, nil
}
