package server

import (
	"net/http"

	"github.com/replayctl/replayctl/internal/replay"
)

// handleReleaseLineage releases the replay budget of an entry's lineage
// (`dlq release-lineage`); the reason is required and audited.
func (s *Server) handleReleaseLineage(w http.ResponseWriter, r *http.Request) {
	var body reasonBody
	if !readJSON(w, r, &body) {
		return
	}
	chain, err := replay.ReleaseLineage(r.Context(), s.cfg.Store, r.PathValue("id"), user(r).User, body.Reason, s.cfg.Now())
	if err != nil {
		serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, chain)
}
