package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/replayctl/replayctl/internal/backtest"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/triage"
)

// BacktestRequest is the body of POST /api/policy/backtest: the candidate
// rules and policy text (as a snapshot holds them) and the window.
type BacktestRequest struct {
	Rules    triage.SourceFile   `json:"rules"`
	Policies []triage.SourceFile `json:"policies"`
	// Since leaves out decisions recorded before it (zero: all).
	Since time.Time `json:"since,omitzero"`
}

// handleBacktest re-decides the recorded decisions with the candidate. It
// is a read: it writes nothing (not even the candidate's snapshot), so it
// sits behind the read permission like the other API reads. A POST only
// because the candidate's text travels in the body.
func (s *Server) handleBacktest(w http.ResponseWriter, r *http.Request) {
	var req BacktestRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Rules.Text == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "rules: the candidate rules text is required")
		return
	}
	// A backtest walks the whole chain on every core: one at a time, so
	// that a reader cannot take the server's CPU with many at once.
	if !s.backtesting.CompareAndSwap(false, true) {
		writeError(w, http.StatusConflict, "conflict", "a policy backtest is already running on this server; try again when it is done")
		return
	}
	defer s.backtesting.Store(false)
	snap := triage.NewSnapshot(req.Rules, req.Policies)
	eng, err := policy.EngineFromSnapshot(r.Context(), snap, policy.DefaultTimeout)
	if err != nil {
		serviceError(w, fmt.Errorf("%w: candidate: %w", errBadRequest, err))
		return
	}
	rep, err := backtest.Decisions(r.Context(), s.cfg.Store, backtest.Options{Engine: eng, Since: req.Since})
	if err != nil {
		serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
