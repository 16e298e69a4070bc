package server

import (
	"context"
	"strings"

	"github.com/replayctl/replayctl/internal/notify"
)

// notifyApprovals tells approvers, in one message per run, that the run
// opened approval requests (and, first, reminds them of requests that
// have aged). It returns at once: delivery (with retries)
// runs in the background and never holds up or fails the run. It uses a
// context of its own so a run's end does not cancel the delivery.
func (s *Server) notifyApprovals(ctx context.Context, runID string, opened int) {
	if err := s.remindAging(ctx, runID); err != nil {
		// A reminder is a courtesy: the run's own work is done and kept.
		s.cfg.Logger.Warn("approval reminders failed", "run", runID, "error", err)
	}
	if s.cfg.Notify == nil || opened == 0 {
		return
	}
	s.cfg.Notify.Send(context.Background(), notify.Batch{Run: runID, Requested: opened,
		Link: strings.TrimSuffix(s.cfg.PublicURL, "/") + "/approvals"})
}
