package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/replayctl/replayctl/internal/replay"
)

// BulkRequest is the body of POST /api/dead-letters/replay and /resolve.
type BulkRequest struct {
	Filter replay.BulkFilter `json:"filter"`
	Max    int               `json:"max,omitempty"`
	Spread replay.Duration   `json:"spread,omitzero"`
	Reason string            `json:"reason,omitempty"` // resolve, and replay with reset_budget: required
	// ResetBudget (replay): re-arm matching entries that reached
	// max_replays or failed, then replay them (operator role).
	ResetBudget bool `json:"reset_budget,omitempty"`
	// Canary (replay): a first slice, judged before the rest; a failing
	// one ends the run in state aborted_by_canary.
	Canary *replay.Canary `json:"canary,omitempty"`
}

// bulk builds the service for one bulk request.
func (s *Server) bulk(ctx context.Context, req *BulkRequest, actor string) (*replay.Bulk, error) {
	engine, snap, err := s.cfg.Engine(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Store.PutSnapshot(ctx, snap.ID, snap); err != nil {
		return nil, err
	}
	rc := &replay.Reconciler{Engine: engine, Store: s.cfg.Store, Router: s.cfg.Router(engine.Rules), Actor: actor,
		Rate: s.cfg.Rate, MaxParallel: s.cfg.MaxParallel, ApprovalTTL: s.cfg.Approvers.Expiry, OnEntry: s.metrics.observeEntry, Breakers: s.cfg.Breakers,
		ForEntry: s.cfg.ForEntry}
	return &replay.Bulk{Reconciler: rc, Inventory: s.cfg.Store, Max: req.Max, Spread: req.Spread.Duration,
		ResetBudget: req.ResetBudget, Reason: req.Reason, Sources: s.cfg.Sources}, nil
}

// handleBulk previews (?preview=true) or starts a bulk replay or resolve
// as a run (202; 409 while another run goes on).
func (s *Server) handleBulk(resolve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req BulkRequest
		if !readJSON(w, r, &req) {
			return
		}
		if err := req.Filter.Compile(); err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		if resolve && req.Reason == "" {
			writeError(w, http.StatusBadRequest, "bad_request", `a reason is required: {"filter": {...}, "reason": "..."}`)
			return
		}
		if resolve && req.ResetBudget {
			writeError(w, http.StatusBadRequest, "bad_request", "reset_budget is for replays, not resolves")
			return
		}
		if req.ResetBudget && strings.TrimSpace(req.Reason) == "" {
			writeError(w, http.StatusBadRequest, "bad_request", `reset_budget needs a reason: {"filter": {...}, "reset_budget": true, "reason": "..."}`)
			return
		}
		preview, _ := strconv.ParseBool(r.URL.Query().Get("preview"))
		rep, run, err := s.StartBulk(r.Context(), &req, user(r).User, resolve, preview, "api")
		switch {
		case errors.Is(err, replay.ErrNoTarget):
			writeError(w, http.StatusUnprocessableEntity, "no_target", err.Error())
		case errors.Is(err, replay.ErrNeedsPlan):
			writeError(w, http.StatusConflict, "needs_plan", err.Error())
		case err != nil:
			serviceError(w, err)
		case preview:
			writeJSON(w, http.StatusOK, rep)
		default:
			w.Header().Set("Location", "/api/runs/"+run.ID)
			writeJSON(w, http.StatusAccepted, map[string]string{"id": run.ID, "state": "running"})
		}
	}
}

// StartBulk returns a preview, or starts the operation as a run.
func (s *Server) StartBulk(ctx context.Context, req *BulkRequest, actor string, resolve, preview bool, trigger string) (*replay.BulkReport, *Run, error) {
	b, err := s.bulk(ctx, req, actor)
	if err != nil {
		return nil, nil, err
	}
	if preview {
		var rep *replay.BulkReport
		if resolve {
			rep, err = b.PreviewResolve(ctx, req.Filter)
		} else {
			rep, err = b.PreviewReplay(ctx, req.Filter)
		}
		return rep, nil, err
	}
	op := "bulk-replay"
	if resolve {
		op = "bulk-resolve"
	} else if _, err := b.CheckReplay(ctx, req.Filter); err != nil {
		// Refused here, not in the run: a replay with nowhere to go must
		// fail the request before anything changes.
		return nil, nil, err
	}
	run, err := s.runs.startWork(trigger, actor, op, func(ctx context.Context, run *Run) error {
		var rep *replay.BulkReport
		var err error
		b.Run = run.tracker // progress, and a cancel that stops new dispatches
		switch {
		case resolve:
			rep, err = b.ExecuteResolve(ctx, req.Filter, req.Reason)
		case req.Canary != nil:
			rep, err = b.ExecuteCanary(ctx, req.Filter, *req.Canary)
			if err == nil && rep != nil && rep.Canary != nil && rep.Canary.Aborted {
				err = fmt.Errorf("%w: %s", replay.ErrAbortedByCanary, strings.TrimPrefix(rep.Stopped, replay.ErrAbortedByCanary.Error()+": "))
			}
		default:
			rep, err = b.ExecuteReplay(ctx, req.Filter)
		}
		s.runs.mu.Lock()
		run.Bulk = rep
		s.runs.mu.Unlock()
		return err
	})
	if err != nil {
		return nil, run, fmt.Errorf("%w", err)
	}
	return nil, run, nil
}
