package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
)

// Approved plans (replay/plan_approval.go) started through the server:
// POST /api/plans/{id}/start (runs start PLAN --server) and the console's
// plan page. The plan is checked before a run is made, so a refused start
// (not approved, expired, the rules and policy changed, already run) is
// the request's answer, not a failed run; ExecutePlan checks again inside
// the run, where marking the plan used settles a race between two starts.

// planRoutes are the plans' API and console routes, and the backtest
// page's (ui_backtest.go).
func (s *Server) planRoutes(m *http.ServeMux) {
	// A plan holds its whole entry set: a read of it takes a heavy slot,
	// as the lists do.
	m.HandleFunc("GET /api/plans/{id}", s.auth(permRead, s.heavy(s.handleShowPlan)))
	m.HandleFunc("POST /api/plans/{id}/start", s.auth(permOperate, s.handleStartPlan))
	u := s.ui
	m.HandleFunc("GET /plans/{id}", u.page(permRead, u.planPage))
	m.HandleFunc("POST /plans/{id}/start", u.page(permOperate, u.startPlanPage))
	m.HandleFunc("GET /backtest", u.page(permRead, u.backtestPage))
	m.HandleFunc("POST /backtest", u.page(permRead, u.backtestRun))
}

// PlanView is GET /api/plans/{id}: the plan as approvers saw it, where its
// approval stands, and whether it would start now (Refusal says why not).
type PlanView struct {
	Plan *replay.Plan `json:"plan"`
	// State is the approval's: pending, approved, rejected, expired; a
	// plan that ran is "executed".
	State     string `json:"state"`
	DecidedBy string `json:"decided_by,omitempty"`
	// Snapshot is the rules and policy snapshot the server decides with now.
	Snapshot  string `json:"current_policy_snapshot,omitempty"`
	Startable bool   `json:"startable"`
	Refusal   string `json:"refusal,omitempty"`
}

// viewPlan reads a plan and checks it against the rules and policy the
// server would start it with, writing nothing (not even the snapshot).
func (s *Server) viewPlan(ctx context.Context, id string) (*PlanView, error) {
	var (
		p       *replay.Plan
		a       *store.Approval
		refusal error
		snap    string
		clock   replay.Clock = replay.SystemClock{} // the runner's, as StartPlan's run uses
	)
	engine, _, err := s.cfg.Engine(ctx)
	if err != nil {
		// The plan is still worth showing; it cannot start while the
		// configuration does not load.
		if p, a, err = replay.LoadPlan(ctx, s.cfg.Store, id); err != nil {
			return nil, err
		}
		refusal = errors.New("the rules and policy do not load: " + err.Error())
	} else {
		snap = engine.Snapshot
		b := &replay.Bulk{Reconciler: &replay.Reconciler{Engine: engine, Store: s.cfg.Store, Clock: clock}, Inventory: s.cfg.Store}
		if p, a, refusal = b.CheckPlan(ctx, id); p == nil {
			return nil, refusal
		}
	}
	v := &PlanView{Plan: p, State: a.State, DecidedBy: a.DecidedBy, Snapshot: snap, Startable: refusal == nil}
	if a.State == store.ApprovalPending && !a.ExpiresAt.IsZero() && clock.Now().After(a.ExpiresAt) {
		v.State = store.ApprovalExpired
	}
	if a.Used {
		v.State = "executed"
	}
	if refusal != nil {
		v.Refusal = refusal.Error()
	}
	return v, nil
}

func (s *Server) handleShowPlan(w http.ResponseWriter, r *http.Request) {
	v, err := s.viewPlan(r.Context(), r.PathValue("id"))
	if err != nil {
		serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// StartPlan starts an approved plan as a run: exactly its entries, at its
// velocity. A plan that would not start is refused before any run exists.
func (s *Server) StartPlan(ctx context.Context, id, actor, trigger string) (*Run, error) {
	b, err := s.bulk(ctx, &BulkRequest{}, actor)
	if err != nil {
		return nil, err
	}
	if _, _, err := b.CheckPlan(ctx, id); err != nil {
		return nil, err
	}
	return s.runs.startWork(trigger, actor, "bulk-replay", func(ctx context.Context, run *Run) error {
		b.Run = run.tracker // progress, and a cancel that stops new dispatches
		rep, err := b.ExecutePlan(ctx, id)
		s.runs.mu.Lock()
		run.Bulk = rep
		s.runs.mu.Unlock()
		return err
	})
}

// handleStartPlan starts a plan (202 with the run; 409 when the plan is
// refused or another run goes on).
func (s *Server) handleStartPlan(w http.ResponseWriter, r *http.Request) {
	var none struct{}
	if !readJSON(w, r, &none) {
		return
	}
	run, err := s.StartPlan(r.Context(), r.PathValue("id"), user(r).User, "api")
	switch {
	case errors.Is(err, replay.ErrPlanNotApproved), errors.Is(err, replay.ErrPlanChanged), errors.Is(err, replay.ErrPlanExpired):
		writeError(w, http.StatusConflict, "plan_refused", err.Error())
	case err != nil:
		serviceError(w, err)
	default:
		w.Header().Set("Location", "/api/runs/"+url.PathEscape(run.ID))
		writeJSON(w, http.StatusAccepted, map[string]string{"id": run.ID, "state": "running"})
	}
}

// planPage shows a plan: what was approved, and a start button only when
// it would start now; otherwise the reason it would not.
func (u *ui) planPage(w http.ResponseWriter, r *http.Request, tok Token) {
	id := r.PathValue("id")
	v, err := u.s.viewPlan(r.Context(), id)
	data := map[string]any{"Title": id, "CanOperate": tok.can(permOperate), "Flash": r.URL.Query().Get("flash"),
		"FlashErr": r.URL.Query().Get("refused") != ""}
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, replay.ErrNotFound) {
			status = http.StatusNotFound
		}
		data["Error"] = err.Error()
		u.render(w, r, status, "plan", tok, data)
		return
	}
	data["View"] = v
	if v.Plan.Blast != nil {
		data["Blast"] = v.Plan.Blast.Describe()
	}
	u.render(w, r, http.StatusOK, "plan", tok, data)
}

// startPlanPage starts the plan and shows its run; a refusal comes back to
// the plan page as an error.
func (u *ui) startPlanPage(w http.ResponseWriter, r *http.Request, tok Token) {
	id := r.PathValue("id")
	run, err := u.s.StartPlan(r.Context(), id, tok.User, "ui")
	if err != nil {
		http.Redirect(w, r, "/plans/"+url.PathEscape(id)+"?refused=1&flash="+url.QueryEscape("not started: "+err.Error()), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(run.ID)+"?flash="+url.QueryEscape("plan "+id+" started as "+run.ID+" by "+tok.User), http.StatusSeeOther)
}
