package server

import (
	"net/http"

	"github.com/replayctl/replayctl/internal/replay"
)

// handleRerequest asks again for an expired approval request (`approvals
// rerequest ID --server`): the same replay.Rerequest as the local command,
// open for approvers.yaml's expiry. Issue 17: every command that changes
// state works through the server too.
func (s *Server) handleRerequest(w http.ResponseWriter, r *http.Request) {
	var body struct{}
	if !readJSON(w, r, &body) {
		return
	}
	a, err := replay.Rerequest(r.Context(), s.cfg.Store, r.PathValue("id"), user(r).User, s.cfg.Now().UTC(), s.cfg.Approvers.Expiry)
	if err != nil {
		serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}
