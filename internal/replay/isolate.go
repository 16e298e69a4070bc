package replay

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// maxIsolateReason bounds the reason kept for a failed entry: the error
// may quote the entry's oversized fields.
const maxIsolateReason = 2000

// handleSafely handles one entry; a panic while doing so becomes that
// entry's error instead of ending the process and the run.
func (r *Reconciler) handleSafely(ctx context.Context, h *handling, e *entry.Entry, src source.Source, pre *prepared) (res EntryResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while handling the entry: %v\n%s", p, firstLines(string(debug.Stack()), 12))
		}
	}()
	return r.handle(ctx, h, e, src, pre)
}

// isolate quarantines one entry whose handling failed (a store error, an
// oversized field, a panic), audited with the reason, so that the run
// goes on with the others (issue 14: one bad entry stopped every run). A
// person releases it once the cause is fixed.
func (r *Reconciler) isolate(ctx context.Context, e *entry.Entry, cause error) EntryResult {
	reason := "could not be handled, quarantined so the run goes on: " + cause.Error()
	if len(reason) > maxIsolateReason {
		reason = reason[:maxIsolateReason] + "…"
	}
	res := EntryResult{Ref: e.Ref(), Final: triage.Quarantine, Status: store.StatusQuarantined, Outcome: "entry_error", Reason: reason}
	now := r.Clock.Now().UTC()
	err := r.Store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		er, err := tx.Entry(e.Ref())
		if err != nil {
			return err
		}
		if er == nil {
			er = &store.EntryRecord{Entry: *e, FirstSeen: now}
		}
		er.LastSeen, er.Status, er.Action, er.Hold, er.Reason = now, store.StatusQuarantined, triage.Quarantine, store.HoldQuarantine, reason
		sealed, err := tx.Append(&audit.Record{Actor: r.Actor, Kind: audit.KindDecision, EntryRef: e.Ref(), EntryID: e.ID,
			Source: e.Source, Key: e.IdempotencyKey, Action: triage.Quarantine, Outcome: "entry_error", Reason: reason})
		if err != nil {
			return err
		}
		er.LastDecision = sealed.Seq
		return tx.PutEntry(er)
	})
	if err != nil {
		// Not even the quarantine could be written: the entry stays as it
		// was (pending) and the next run tries again; the report says so.
		res.Status, res.Final = store.StatusPending, triage.ManualReview
		res.Reason = reason + "; the quarantine could not be recorded either: " + err.Error()
	}
	return res
}

func firstLines(s string, n int) string {
	for i := range len(s) {
		if s[i] == '\n' {
			if n--; n == 0 {
				return s[:i]
			}
		}
	}
	return s
}
