package server

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/replayctl/replayctl/internal/replay"
)

// recentRuns is the one place the console lists runs: the runner's
// memory, newest first.
func (u *ui) recentRuns() []Run {
	r := u.s.runs
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Run, 0, len(r.order))
	for _, id := range slices.Backward(r.order) {
		if run, ok := r.runs[id]; ok {
			out = append(out, *run)
		}
	}
	return out
}

func (u *ui) runsPage(w http.ResponseWriter, r *http.Request, tok Token) {
	u.render(w, r, http.StatusOK, "runs", tok, map[string]any{"Title": "Runs", "Runs": u.recentRuns()})
}

// runPage shows one run; while it runs the page refreshes itself (a meta
// refresh: progress without JavaScript).
func (u *ui) runPage(w http.ResponseWriter, r *http.Request, tok Token) {
	run, ok := u.s.runs.get(r.PathValue("id"))
	if !ok {
		u.render(w, r, http.StatusNotFound, "runs", tok, map[string]any{"Error": "no run " + r.PathValue("id") +
			" in this process (it keeps the last 100; a restart forgets them; the audit trail keeps what they did)", "Runs": u.recentRuns()})
		return
	}
	data := map[string]any{"Title": run.ID, "Run": run, "Flash": r.URL.Query().Get("flash"), "CanOperate": tok.can(permOperate)}
	if run.State == "running" {
		data["Refresh"] = 2
	}
	u.render(w, r, http.StatusOK, "run", tok, data)
}

// humanAge is an age people read at a glance: "45s", "12m", "3h 5m", "4d 2h".
func humanAge(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd %dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// publishBulk shows a bulk run's progress: a copy, so the run page never
// reads a report the run is still changing.
func (s *Server) publishBulk(run *Run, rep *replay.BulkReport) {
	cp := *rep
	cp.Items = slices.Clone(rep.Items)
	cp.Why = maps.Clone(rep.Why)
	cp.Replays = maps.Clone(rep.Replays)
	s.runs.mu.Lock()
	run.Bulk = &cp
	s.runs.mu.Unlock()
}

// cancelRun is the one place the console cancels a run, through the same
// path as the API: the run stops new dispatches at once, an entry in flight
// finishes and is recorded, and the run ends "cancelled".
func (s *Server) cancelRun(id, actor string) error {
	_, err := s.runs.cancel(context.Background(), id, actor)
	return err
}

func (u *ui) cancelRunPage(w http.ResponseWriter, r *http.Request, tok Token) {
	id := r.PathValue("id")
	flash := "cancel requested by " + tok.User
	if err := u.s.cancelRun(id, tok.User); err != nil {
		flash = "not cancelled: " + err.Error()
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(id)+"?flash="+url.QueryEscape(flash), http.StatusSeeOther)
}
