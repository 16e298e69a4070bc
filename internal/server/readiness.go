package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/replayctl/replayctl/internal/triage"
)

// errConfigInvalid marks a run refused because rules.yaml or a policy does
// not load. Only runs are refused: the UI, the API and approvals keep
// working, since people need them most while the configuration is broken.
var errConfigInvalid = errors.New("runs refused: rules.yaml or a policy is invalid")

// engine loads rules and policies for a run and records the outcome in
// replayctl_config_valid, so the ReplayctlConfigInvalid alert fires.
func (s *Server) engine(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
	e, snap, err := s.cfg.Engine(ctx)
	if err != nil {
		s.metrics.configValid.Set(0)
		return nil, snap, fmt.Errorf("%w: %w", errConfigInvalid, err)
	}
	s.metrics.configValid.Set(1)
	return e, snap, nil
}

// loadForRun loads the configuration for a run a request starts, or
// answers 422 when it does not load, so the caller sees why at once
// instead of in a failed run. The run uses what it loaded (nil when it
// answered): the rules and policies are compiled once per run.
func (s *Server) loadForRun(w http.ResponseWriter, r *http.Request) *loadedConfig {
	e, snap, err := s.engine(r.Context())
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "invalid_configuration", err.Error())
		return nil
	}
	return &loadedConfig{engine: e, snap: snap}
}

// loadedConfig is a compiled configuration: the engine and its snapshot.
type loadedConfig struct {
	engine *triage.Engine
	snap   triage.Snapshot
}

// requestEngine loads the configuration at most once for one request (a
// multi-approve checks each request's evidence against the same rules).
type requestEngine struct {
	load func(context.Context) (*triage.Engine, triage.Snapshot, error)
	once sync.Once
	cfg  loadedConfig
	err  error
}

func (s *Server) requestEngine() *requestEngine { return &requestEngine{load: s.cfg.Engine} }

func (e *requestEngine) get(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
	e.once.Do(func() { e.cfg.engine, e.cfg.snap, e.err = e.load(ctx) })
	return e.cfg.engine, e.cfg.snap, e.err
}
