package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

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

// refuseInvalidConfig answers a request to start a run with 422 when the
// configuration does not load, so the caller sees why at once instead of
// in a failed run. It reports whether it answered.
func (s *Server) refuseInvalidConfig(w http.ResponseWriter, r *http.Request) bool {
	if _, _, err := s.engine(r.Context()); err != nil {
		writeError(w, http.StatusUnprocessableEntity, "invalid_configuration", err.Error())
		return true
	}
	return false
}
