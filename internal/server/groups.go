package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
)

// GroupList is GET /api/groups: every failure group, largest open count
// first.
type GroupList struct {
	Items []store.GroupSummary `json:"items"`
}

// GroupChange is the body of POST /api/groups/{id}/ack|hold|release.
type GroupChange struct {
	Note   string    `json:"note,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Until  time.Time `json:"until,omitzero"`
}

func (s *Server) groups(actor string) *replay.Groups {
	return &replay.Groups{Store: s.cfg.Store, Actor: actor, Clock: serverClock{s.cfg.Now}}
}

// serverClock is the server's clock as a replay.Clock.
type serverClock struct{ now func() time.Time }

func (c serverClock) Now() time.Time { return c.now() }

// Sleep is never used by the groups' lifecycle (they only read the time).
func (c serverClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func groupError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, store.ErrBadGroup):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, replay.ErrGroupState):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	default:
		serviceError(w, err)
	}
}

func (s *Server) handleListGroups(w http.ResponseWriter, r *http.Request) {
	g := s.groups(user(r).User)
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "bad_request", "limit must be a number of groups (0: all)")
			return
		}
		limit = n
	}
	items, err := g.List(r.Context(), limit)
	if err != nil {
		groupError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, GroupList{Items: items})
}

func (s *Server) handleShowGroup(w http.ResponseWriter, r *http.Request) {
	g := s.groups(user(r).User)
	one, err := g.Show(r.Context(), r.PathValue("id"))
	if err != nil {
		groupError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, one)
}

func (s *Server) handleChangeGroup(w http.ResponseWriter, r *http.Request) {
	var body GroupChange
	if !readJSON(w, r, &body) {
		return
	}
	who := user(r).User
	g := s.groups(who)
	id, ctx := r.PathValue("id"), r.Context()
	var st *store.GroupState
	var err error
	switch r.PathValue("verb") {
	case "ack":
		st, err = g.Ack(ctx, id, body.Note)
	case "hold":
		st, err = g.Hold(ctx, id, body.Reason, body.Until)
	case "release":
		st, err = g.Release(ctx, id, body.Reason)
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such group action (ack, hold, release)")
		return
	}
	if err != nil {
		groupError(w, err)
		return
	}
	s.cfg.Logger.Info("group changed", "group", id, "state", st.State, "by", who, "audit", st.AuditSeq)
	writeJSON(w, http.StatusOK, st)
}
