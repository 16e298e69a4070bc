package server

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/notify"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// reminderOutcome marks the audit record of one approval reminder.
const reminderOutcome = "reminded"

// reminders remembers when each pending request was last reminded of.
// It is read from the audit trail once (so a restart does not remind
// twice in a period) and kept in memory after that.
type reminders struct {
	mu     sync.Mutex
	loaded bool
	last   map[string]time.Time
}

// RemindAging is the approval-reminders duty's round (serve's maintenance
// group): the reminders a run sends after it ends, sent whether or not
// runs happen.
func (s *Server) RemindAging(ctx context.Context) error {
	return s.remindAging(ctx, "")
}

// remindAging reminds approvers, after a run, of the requests that have
// waited longer than Config.Remind.After (issue 19: "or age past a
// threshold"), at most once per Config.Remind.Every for each request. Each
// reminder is audited (kind approval, outcome "reminded") before the
// webhooks are called; delivery runs in the background like every
// notification and never fails the run.
func (s *Server) remindAging(ctx context.Context, runID string) error {
	if s.cfg.Notify == nil || s.cfg.Remind.After <= 0 {
		return nil
	}
	s.rem.mu.Lock()
	defer s.rem.mu.Unlock()
	if !s.rem.loaded {
		// The approval records from the audit index by kind, not the chain.
		seqs, err := s.cfg.Store.AuditSeqs(ctx, store.AuditFilter{Kind: audit.KindApproval})
		if err != nil {
			return err
		}
		last := map[string]time.Time{}
		err = s.cfg.Store.AuditRecords(ctx, seqs, func(_ uint64, sealed audit.Sealed, derr error) error {
			if derr != nil {
				return nil // audit verify reports it
			}
			r, err := sealed.Open()
			if err != nil || r.Outcome != reminderOutcome {
				return nil
			}
			var d struct {
				ApprovalID string    `json:"approval_id"`
				At         time.Time `json:"reminded_at"`
			}
			if json.Unmarshal(r.Detail, &d) != nil || d.ApprovalID == "" {
				return nil
			}
			// reminded_at is the server's clock, the one Due compares with.
			if d.At.IsZero() {
				d.At = r.Time
			}
			if d.At.After(last[d.ApprovalID]) {
				last[d.ApprovalID] = d.At
			}
			return nil
		})
		if err != nil {
			return err
		}
		s.rem.last, s.rem.loaded = last, true
	}
	var waiting []notify.Waiting
	pending := map[string]*store.Approval{}
	if err := s.cfg.Store.PendingApprovals(ctx, func(a *store.Approval) error {
		if a.State == store.ApprovalPending {
			waiting = append(waiting, notify.Waiting{ID: a.ID, Group: a.ApproverGroup, RequestedAt: a.RequestedAt})
			pending[a.ID] = a
		}
		return nil
	}); err != nil {
		return err
	}
	now := s.cfg.Now().UTC()
	due := s.cfg.Remind.Due(now, waiting, s.rem.last)
	if len(due) == 0 {
		return nil
	}
	groups := map[string]int{}
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		for _, w := range due {
			a := pending[w.ID]
			detail, _ := json.Marshal(map[string]string{"approval_id": a.ID, "approver_group": a.ApproverGroup,
				"waiting": now.Sub(a.RequestedAt).Round(time.Second).String(), "run": runID,
				"reminded_at": now.Format(time.RFC3339Nano)})
			if _, err := tx.Append(&audit.Record{Actor: "replayctl", Kind: audit.KindApproval, EntryRef: a.EntryRef,
				EntryID: a.EntryID, Source: a.Source, Key: a.Key, Action: triage.RequireApproval, Outcome: reminderOutcome,
				Reason: "waiting longer than " + s.cfg.Remind.After.String() + ": approvers reminded", Detail: detail}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, w := range due {
		s.rem.last[w.ID] = now
		groups[w.Group]++
	}
	s.cfg.Notify.Send(context.Background(), notify.Batch{Run: runID, Requested: len(due), Reason: "aging",
		OlderThan: s.cfg.Remind.After.String(), Groups: groups,
		Link: strings.TrimSuffix(s.cfg.PublicURL, "/") + "/approvals?state=pending"})
	return nil
}
