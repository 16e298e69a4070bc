package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/replayctl/replayctl/internal/backtest"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/triage"
)

// BacktestRequest is the body of POST /api/policy/backtest: the candidate
// rules and policy text (as a snapshot holds them), or the name of one of
// the server's configured candidates, and the window.
type BacktestRequest struct {
	Rules    triage.SourceFile   `json:"rules"`
	Policies []triage.SourceFile `json:"policies"`
	// Candidate names one of the server's configured candidates
	// (serve --backtest-candidate) instead of Rules and Policies: the
	// server reads its files, a client never names a path.
	Candidate string `json:"candidate,omitempty"`
	// Since leaves out decisions recorded before it (zero: all).
	Since time.Time `json:"since,omitzero"`
	// Sources, when set, re-decide what these of the server's sources
	// (as GET /api/stats names them) hold now, with today's rules and with
	// the candidate, instead of the recorded decisions.
	Sources []string `json:"sources,omitempty"`
}

// errBacktesting: another backtest is running on this server.
var errBacktesting = errors.New("backtest busy")

// BacktestCandidate is a candidate rules file and policy directory the
// server may backtest by name (serve --backtest-candidate NAME=RULES,POLICIES).
type BacktestCandidate struct {
	Name     string `json:"name"`
	Rules    string `json:"rules"`
	Policies string `json:"policies"`
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
	rep, err := s.Backtest(r.Context(), &req)
	switch {
	case errors.Is(err, errBacktesting):
		writeError(w, http.StatusConflict, "conflict", err.Error())
		return
	case err != nil:
		serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// Backtest runs one backtest for the API and the console: one at a time
// (it uses every core), never acting.
func (s *Server) Backtest(ctx context.Context, req *BacktestRequest) (*backtest.Report, error) {
	if req.Candidate == "" && req.Rules.Text == "" {
		return nil, fmt.Errorf("%w: rules: the candidate rules text (or a configured candidate's name) is required", errBadRequest)
	}
	if req.Candidate != "" && req.Rules.Text != "" {
		return nil, fmt.Errorf("%w: give the candidate's text or a configured candidate's name, not both", errBadRequest)
	}
	var srcs []source.Source
	for _, name := range req.Sources {
		i := slices.IndexFunc(s.cfg.Sources, func(src source.Source) bool { return src.String() == name })
		if i < 0 {
			return nil, fmt.Errorf("%w: sources: %q is not one of this server's sources", errBadRequest, name)
		}
		srcs = append(srcs, s.cfg.Sources[i])
	}
	// A backtest walks the whole chain on every core: one at a time, so
	// that a reader cannot take the server's CPU with many at once.
	if !s.backtesting.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("%w: a policy backtest is already running on this server; try again when it is done", errBacktesting)
	}
	defer s.backtesting.Store(false)
	var eng *triage.Engine
	var err error
	if req.Candidate != "" {
		i := slices.IndexFunc(s.cfg.BacktestCandidates, func(c BacktestCandidate) bool { return c.Name == req.Candidate })
		if i < 0 {
			return nil, fmt.Errorf("%w: candidate %q is not configured on this server (serve --backtest-candidate)", errBadRequest, req.Candidate)
		}
		c := s.cfg.BacktestCandidates[i]
		eng, _, err = policy.LoadEngine(ctx, c.Rules, c.Policies, policy.DefaultTimeout)
	} else {
		eng, err = policy.EngineFromSnapshot(ctx, triage.NewSnapshot(req.Rules, req.Policies), policy.DefaultTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: candidate: %w", errBadRequest, err)
	}
	opts := backtest.Options{Engine: eng, Since: req.Since}
	if len(srcs) == 0 {
		return backtest.Decisions(ctx, s.cfg.Store, opts)
	}
	baseline, _, err := s.cfg.Engine(ctx)
	if err != nil {
		return nil, fmt.Errorf("today's rules and policy: %w", err)
	}
	rep, err := backtest.Entries(ctx, source.All(srcs), s.cfg.Store.LedgerView, baseline, s.cfg.Now().UTC(), opts)
	if rep != nil {
		rep.Since = time.Time{} // entries read now: the window does not apply
	}
	return rep, err
}
