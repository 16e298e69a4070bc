package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/group"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Store is what the runner needs of the state store: the one store
// contract. What differs between a store one process holds and a shared
// one is keyed on Features().Shared, one path per concern.
type Store = store.Backend

// DefaultApprovalTTL is how long an approval request stays open.
const DefaultApprovalTTL = 24 * time.Hour

// Reconciler ingests, decides and acts. Build one per run.
type Reconciler struct {
	Engine      *triage.Engine
	Store       Store
	Router      Router
	Clock       Clock
	Actor       string
	MaxParallel int // concurrent dispatches (default 5)
	// Window is how many entries a run on a single-process store decides
	// together, writing their intents in one transaction and their
	// outcomes in another (window.go; default max(4*MaxParallel, 64)).
	Window int
	// Owner names this worker in leases (shared stores; default host:pid).
	Owner string
	// Lease is how long a claim on an entry lasts (shared stores; default
	// 2m). It must exceed a dispatch's timeout.
	Lease       time.Duration
	Rate        float64       // dispatches per second to each route (destination), across workers (0: unlimited)
	Limit       int           // entries to handle this run (0: all)
	ApprovalTTL time.Duration // default 24h
	// Breakers are the targets' circuit breakers; share one between runs
	// (serve) so an outage seen by one run holds the next. Default: a
	// fresh set for this Reconciler.
	Breakers *Breakers
	// MaxWait bounds how long a run waits, on Clock, for retries that come
	// due (and breakers that half-open) after its first pass; 0 (cron):
	// never wait, a later run takes them.
	MaxWait time.Duration
	// OnEntry, when set, is called after each entry (progress, listings).
	OnEntry func(EntryResult)
	// ForEntry, when set, finds a stored entry's source again for a replay
	// outside a run (single and bulk replays, approvals), so that its
	// write-back runs as a run's would (registry.Finder.For). Without it,
	// or where ok is false, such a replay writes nothing back.
	ForEntry func(e *entry.Entry) (src source.Source, ok bool)
	// OnHoldExpired, when set, is told of each group hold that ended by
	// itself at the start of the run (groups.go; audited either way).
	OnHoldExpired func(ExpiredHold)

	locks keyLocks
	pace  *pacers
	// onDecide, when set (tests), is told of every decision made (decide.go).
	onDecide func(ref string)
}

// EntryResult is what happened to one entry in a run.
type EntryResult struct {
	Ref      string          `json:"entry_ref"`
	Decision triage.Decision `json:"decision"`
	// Final is the action taken, after probes and routing (it can differ
	// from Decision.Action: a probe may resolve, a missing target escalate).
	Final   triage.Action `json:"final_action"`
	Status  string        `json:"status"`
	Replays []string      `json:"replays,omitempty"` // outcome of each dispatch in this run
	// TargetDown counts this run's dispatches that found the target down:
	// not sent, or answered by a gateway that it is unavailable
	// (502/503/504, a timeout), as the breaker counts them.
	TargetDown int    `json:"target_down,omitempty"`
	Outcome    string `json:"outcome,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Recorded   bool   `json:"recorded"` // a new decision record was written
	New        bool   `json:"new"`      // the entry was seen for the first time
	// NextAttempt is when the entry may be dispatched again: its retry's
	// due time, or when its target's open breaker lets a trial through.
	NextAttempt time.Time `json:"next_attempt_at,omitzero"`
}

// Report is a run's summary.
type Report struct {
	Started   time.Time `json:"started"`
	Duration  string    `json:"duration"`
	Summary   *Summary  `json:"summary"`
	Recovered int       `json:"recovered_outcome_unknown"`
	Replays   struct {
		Dispatched int `json:"dispatched"`
		Succeeded  int `json:"succeeded"`
		Failed     int `json:"failed"`
		Unknown    int `json:"outcome_unknown"`
		Retried    int `json:"retried"`
		NotSent    int `json:"not_sent"`
		// TargetDown: dispatches that found the target down (not sent, or
		// 502/503/504 or a timeout); all of them means nothing reached a
		// working target.
		TargetDown int `json:"target_down"`
	} `json:"replays"`
	ProbedCommitted int `json:"probed_committed"`
	NoTarget        int `json:"no_target"`
	ApprovalsOpened int `json:"approvals_requested"`
	WriteBackErrors int `json:"write_back_errors"`
	// EntryErrors counts entries quarantined because handling them failed
	// (a store error, an oversized field, a panic); the run went on.
	EntryErrors    int            `json:"entry_errors,omitempty"`
	AwaitingPeople int            `json:"awaiting_people"`
	StatusCounts   map[string]int `json:"by_status"`
	Interrupted    bool           `json:"interrupted,omitempty"`
	// Shared stores: entries new to the store, and claims lost to another
	// worker (lease expired) whose work was therefore not recorded.
	Ingested    int `json:"ingested,omitempty"`
	StaleClaims int `json:"stale_claims,omitempty"`
	// HeldElsewhere: entries not checked this run that another worker's
	// live lease holds (it is handling them, or died and its lease ends
	// at HeldUntil, the latest of those leases); the next run takes them.
	HeldElsewhere int       `json:"held_by_other_workers,omitempty"`
	HeldUntil     time.Time `json:"held_until,omitzero"`
	// Notes are what sources report skipping (Redis ids whose entry expired).
	Notes []string `json:"notes,omitempty"`
	// HoldsExpired are the group holds that ended by themselves when the
	// run started (groups.go): opened again, each with an audit record.
	HoldsExpired     []ExpiredHold `json:"holds_expired,omitempty"`
	DecisionsWritten int           `json:"decisions_recorded"`
	// Scheduled: entries whose retry is not due yet; Unavailable: entries
	// held because their target's breaker is open. Neither is a failure.
	Scheduled   int `json:"retry_scheduled"`
	Unavailable int `json:"target_unavailable"`
	// Waiting: entries left pending with a next attempt time (a retry
	// scheduled, now or earlier, or an open breaker); NextAttempt is the
	// earliest of those times.
	Waiting     int       `json:"waiting_for_retry"`
	NextAttempt time.Time `json:"next_attempt_at,omitzero"`
}

// add counts one entry's final result of the run.
func (rep *Report) add(res *EntryResult) {
	d := res.Decision
	d.Action = res.Final
	rep.Summary.Add(&d)
	rep.StatusCounts[res.Status]++
	if res.Recorded {
		rep.DecisionsWritten++
	}
	if !res.NextAttempt.IsZero() {
		rep.Waiting++
		if rep.NextAttempt.IsZero() || res.NextAttempt.Before(rep.NextAttempt) {
			rep.NextAttempt = res.NextAttempt
		}
	}
	switch res.Outcome {
	case "probe_committed":
		rep.ProbedCommitted++
	case "no_target":
		rep.NoTarget++
	case "approval_requested":
		rep.ApprovalsOpened++
	case "write_back_failed":
		rep.WriteBackErrors++
	case "entry_error":
		rep.EntryErrors++
	case OutcomeScheduled:
		rep.Scheduled++
	case OutcomeUnavailable:
		rep.Unavailable++
	}
}

// addReplays counts the dispatches one handling of an entry made.
func (rep *Report) addReplays(res *EntryResult) {
	rep.Replays.TargetDown += res.TargetDown
	for _, o := range res.Replays {
		rep.Replays.Dispatched++
		switch o {
		case Succeeded.String():
			rep.Replays.Succeeded++
		case Failed.String():
			rep.Replays.Failed++
		case Unknown.String():
			rep.Replays.Unknown++
		case Retry.String():
			rep.Replays.Retried++
		case NotSent.String():
			rep.Replays.NotSent++
		}
	}
}

// Recover turns every dispatching record whose owner is gone (a process
// that died before writing the outcome) into outcome_unknown: it may or
// may not have happened, so it is never retried blindly. Dispatches in
// flight in this process are left alone, and on a shared store those of
// a worker whose lease is live (recoverAbandoned, claim.go).
func Recover(ctx context.Context, s Store, actor string) (int, error) {
	var keys []idempotency.Record
	if err := s.LedgerRecords(ctx, func(r *idempotency.Record) error {
		if r.State == idempotency.Dispatching && !inFlightHere(s, r) {
			keys = append(keys, *r)
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("recover: %w", err)
	}
	n := 0
	for i := range keys {
		err := recoverAbandoned(ctx, s, actor, &keys[i])
		switch {
		case errors.Is(err, idempotency.ErrConflict), errors.Is(err, errInFlight), errors.Is(err, store.ErrStaleFence):
			// Its outcome arrived, a live worker holds it, or another took
			// its claim meanwhile: not ours to recover.
		case err != nil:
			return n, fmt.Errorf("recover %s: %w", keys[i].Key, err)
		default:
			n++
		}
	}
	return n, nil
}

func setStatus(tx store.Tx, ref, status, reason string) error {
	if ref == "" {
		return nil
	}
	er, err := tx.Entry(ref)
	if err != nil || er == nil {
		return err
	}
	er.Status, er.Reason = status, reason
	if status == store.StatusFailed {
		er.Hold = store.HoldFailed
	}
	return tx.PutEntry(er)
}

// handle decides one entry and acts on the decision. pre, when set, is
// what was read and decided ahead for it (a window, a bulk replay's plan).
func (r *Reconciler) handle(ctx context.Context, h *handling, e *entry.Entry, src source.Source, pre *prepared) (EntryResult, error) {
	unlock := r.locks.lock(e.IdempotencyKey)
	defer unlock()
	if pre != nil && pre.ref == e.Ref() {
		h.basis = pre
		res, err := r.handleOnce(ctx, h, e, src, pre)
		if !errors.Is(err, errStaleRead) {
			return res, err
		}
		// Someone else (Replay now, a resolve, a second copy of the key)
		// wrote the entry or its key after it was read ahead: decide
		// again on what is stored now.
		h.basis = nil
	}
	return r.handleOnce(ctx, h, e, src, nil)
}

// handleOnce is handle on what p read ahead (nil: read it now): facts,
// one decision (decide.go), the act, its record. Every write it makes on
// p's reads first checks that they still hold (prepared.still), so a
// stale read ahead is never acted on.
func (r *Reconciler) handleOnce(ctx context.Context, h *handling, e *entry.Entry, src source.Source, p *prepared) (EntryResult, error) {
	var d triage.Decision
	if p != nil {
		d = p.decision // decided ahead (window.go, bulk.go)
	} else {
		// One claim model for every path (claim.go): a dispatch left by an
		// owner that is gone becomes outcome_unknown; one in flight here is
		// left to finish, and nothing is decided on it meanwhile.
		if err := r.recoverKey(ctx, e.IdempotencyKey, e.Ref(), "dispatch found without an outcome, its owner gone"); errors.Is(err, errInFlight) {
			return EntryResult{Ref: e.Ref(), Final: triage.Skip, Status: store.StatusReplaying, Outcome: "in_flight",
				Reason: "a replay of this key is in flight: its outcome decides"}, nil
		} else if err != nil {
			return EntryResult{}, err
		}
		if err := r.Store.View(ctx, func(tx store.Tx) error {
			var err error
			p, err = readFacts(tx, e)
			return err
		}); err != nil {
			return EntryResult{}, err
		}
		var err error
		if d, err = r.decideOn(ctx, e, p.view, p.approval, ""); err != nil {
			return EntryResult{Ref: e.Ref(), Decision: d, Final: d.Action}, err
		}
	}
	view, stored := p.view, p.entry
	res := EntryResult{Ref: e.Ref(), Decision: d, Final: d.Action}

	// An entry a person resolved, or one held in quarantine, stays as it
	// is until a person changes it; the fresh decision is still shown.
	var held *store.EntryRecord
	owed, why := "", ""
	if stored != nil {
		owed, why = stored.WriteBackPending, stored.Reason
		switch {
		case undecodableLifted(stored, e):
			// Decided afresh below; recordTx takes the hold off and says so.
		case stored.Hold != "":
			held = stored
		}
	}
	// A write-back owed from a resolve or a failed earlier attempt is
	// retried on every run until the source takes it.
	if owed != "" {
		r.writeBack(ctx, h, e, src, &res, owed, why, nil)
	}
	if held != nil {
		// The reason stays the one that put the entry on hold (status and
		// hold say it is held); wrapping it again each run would grow it.
		res.Final, res.Status, res.Reason = triage.Quarantine, held.Status, held.Reason
		if held.Hold == store.HoldResolved {
			res.Final = triage.Skip
		}
		err := r.record(ctx, h, e, &res, nil)
		return res, err
	}

	if d.NeedsProbe() {
		if route, ok := r.Router.Route(e); ok && route.Prober != nil {
			// The compensating read is one more fact: the same decision
			// again, on it (hashed once per run).
			view.Probe = r.probe(ctx, h, e, route)
			var err error
			if d, err = r.decideOn(ctx, e, view, p.approval, d.PayloadHash); err != nil {
				return EntryResult{Ref: e.Ref(), Decision: d, Final: d.Action}, err
			}
			res = EntryResult{Ref: e.Ref(), Decision: d, Final: d.Action}
			if view.Probe == triage.ProbeCommitted {
				res.Outcome = "probe_committed"
				commit := commitFromProbe(e, &d, r.Actor)
				if _, asks := route.Prober.(EntryProber); asks {
					// The system says it no longer holds the entry: there
					// is nothing to take out of its DLQ (settle.go).
					commit = settledBy(commit)
				}
				err := r.record(ctx, h, e, &res, commit)
				return res, err
			}
		}
	}
	if d.Action == triage.AutoReplay {
		err := r.replay(ctx, h, e, src, &res, stored)
		return res, err
	}
	if d.Action == triage.Skip && d.Ledger.State == triage.StateSucceeded {
		if stored != nil && stored.Status == store.StatusResolved {
			res.Status = stored.Status // settled: a later run does not make it "replayed"
		}
		if owed == "" && r.Router != nil && (stored == nil || !stored.Settled) {
			if rt, ok := r.Router.Route(e); ok && keptAfterReplay(e, src, &d, rt) {
				r.settleKept(ctx, h, e, src, &res, rt) // settle.go
			}
		}
	}
	err := r.record(ctx, h, e, &res, nil)
	return res, err
}

// approved reports whether a person approved this entry's replay on the
// same evidence, and the approval was not used yet.
func (r *Reconciler) approved(ctx context.Context, e *entry.Entry, d *triage.Decision) (bool, error) {
	ok := false
	err := r.Store.View(ctx, func(tx store.Tx) error {
		er, err := tx.Entry(e.Ref())
		if err != nil {
			return err
		}
		id, err := currentApprovalID(tx, er, e.Ref(), d.EvidenceHash)
		if err != nil {
			return err
		}
		a, err := tx.Approval(id)
		ok = a != nil && a.Evidence == d.EvidenceHash && a.State == store.ApprovalApproved && !a.Used
		return err
	})
	return ok, err
}

// currentApprovalID is the id of the entry's request on this evidence: the
// entry's latest request when it was asked on the same evidence (it may
// be a re-request after an expiry), else the deterministic first id.
func currentApprovalID(tx store.Tx, er *store.EntryRecord, ref, evidence string) (string, error) {
	if er != nil && er.ApprovalID != "" {
		a, err := tx.Approval(er.ApprovalID)
		if err != nil {
			return "", err
		}
		if a != nil && a.Evidence == evidence {
			return a.ID, nil
		}
	}
	return store.ApprovalID(ref, evidence), nil
}

// probe makes the compensating read. It is recorded in the audit chain
// when its result differs from the entry's last one, so that a cron run
// every few minutes does not repeat the same record.
func (r *Reconciler) probe(ctx context.Context, h *handling, e *entry.Entry, route Route) string {
	pr, detail := ProbeInconclusive, ""
	func() {
		defer outbound(h)() // a window's calls out stay within --max-parallel
		if ep, ok := route.Prober.(EntryProber); ok {
			pr, detail = ep.ProbeEntry(ctx, e) // the system knows the entry by its own id
		} else {
			pr, detail = route.Prober.Probe(ctx, e.IdempotencyKey)
		}
	}()
	result := [...]string{triage.ProbeCommitted, triage.ProbeNotCommitted, triage.ProbeInconclusive}[pr]
	err := r.Store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		er, err := tx.Entry(e.Ref())
		if err != nil || (er != nil && er.Probe == result) {
			return err
		}
		if _, err := tx.Append(&audit.Record{Actor: r.Actor, Kind: audit.KindProbe, EntryRef: e.Ref(), EntryID: e.ID,
			Source: e.Source, Key: e.IdempotencyKey, Outcome: result, Reason: detail}); err != nil {
			return err
		}
		if er == nil {
			return nil
		}
		er.Probe = result
		return tx.PutEntry(er)
	})
	if err != nil {
		// A probe result that could not be recorded is not acted on: no
		// action without its audit record. Inconclusive sends the entry
		// to a person, never to a blind retry.
		return triage.ProbeInconclusive
	}
	return result
}

// commitFromProbe moves the key to succeeded after a probe found it
// committed, in the transaction that records the decision.
func commitFromProbe(e *entry.Entry, d *triage.Decision, actor string) func(store.Tx, *store.EntryRecord) error {
	return func(tx store.Tx, er *store.EntryRecord) error {
		cur, err := tx.Ledger(e.IdempotencyKey)
		if err != nil {
			return err
		}
		from := idempotency.None
		if cur != nil {
			from = cur.State
		}
		if from == idempotency.None {
			if _, err := tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, To: idempotency.Decided,
				EntryRef: e.Ref(), PayloadHash: d.PayloadHash}); err != nil {
				return err
			}
			from = idempotency.Decided
		}
		if !idempotency.CanTransition(from, idempotency.Succeeded) {
			return nil // already succeeded, or in a state a probe must not overrule
		}
		_, err = tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, From: from, To: idempotency.Succeeded})
		return err
	}
}

// replay makes at most one dispatch of the entry in this run: when its
// scheduled retry is due and its target's breaker lets it through. Every
// dispatch is preceded by a durable intent and followed by a durable
// outcome; a retryable outcome records the next attempt's time, and the
// run moves on (schedule.go) instead of sleeping.
func (r *Reconciler) replay(ctx context.Context, h *handling, e *entry.Entry, src source.Source, res *EntryResult, stored *store.EntryRecord) error {
	d := &res.Decision
	ref := e.Ref() // made once: it is named by each record below
	route, ok := r.Router.Route(e)
	if !ok {
		res.Final, res.Outcome = triage.ManualReview, "no_target"
		res.Reason = fmt.Sprintf("no replay target for topic %q from %s: add a targets entry to rules.yaml or use --target", e.Topic, e.Source)
		return r.record(ctx, h, e, res, nil)
	}
	if stored != nil && stored.NextAttemptAt.After(r.Clock.Now()) && !h.now {
		// Not due: nothing to write, the entry already says when.
		res.Status, res.Outcome, res.NextAttempt = store.StatusPending, OutcomeScheduled, stored.NextAttemptAt
		res.Reason = scheduledReason(stored.NextAttemptAt)
		return nil
	}
	done, until, ok := r.Breakers.allow(route.Name)
	r.auditBreakers(ctx)
	if !ok {
		res.Status, res.Outcome, res.NextAttempt = store.StatusPending, OutcomeUnavailable, until
		res.Reason = fmt.Sprintf("target unavailable: circuit breaker of %s is open (next trial at %s)", route.Name, until.UTC().Format(time.RFC3339))
		if stored != nil && stored.Status == store.StatusPending && strings.HasPrefix(stored.Reason, "target unavailable") {
			return nil // already says so: an outage writes nothing per entry per run
		}
		return r.record(ctx, h, e, res, nil)
	}
	dispatched := false
	defer func() {
		if !dispatched {
			done(nil) // the admitted request never went out: it counts neither way
			r.auditBreakers(ctx)
		}
	}()
	owner := instanceOf(r.Store, r.Owner)
	var ends []func() // a panic in a dispatcher must not leave a key "in flight" for good
	defer func() {
		for _, end := range ends {
			end()
		}
	}()
	if err := r.pace.wait(ctx, route.Name); err != nil {
		res.Status, res.Reason = store.StatusPending, "run interrupted before dispatch"
		return r.record(ctx, h, e, res, nil)
	}
	attempt, budget := 0, 0
	res.Status = store.StatusReplaying
	// Registered before the intent commits, ended once the outcome is
	// written (or the intent failed): bbolt's inFlightHere (claim.go).
	endDispatch := r.Store.BeginDispatch(e.IdempotencyKey)
	ends = append(ends, endDispatch)
	// The dispatch record is encoded here, outside the write lock, for
	// the attempt the decision's ledger view makes next; the transaction
	// sets its reason from the ledger and re-encodes only when that
	// differs (audit.Prepare).
	predicted := d.Ledger.Replays + 1 // the attempt (and budget spent) the ledger should give
	dispatchRec := audit.Record{Actor: r.Actor, Kind: audit.KindDispatch, EntryRef: ref, EntryID: e.ID,
		Source: e.Source, Key: e.IdempotencyKey, Action: triage.AutoReplay, PolicySnapshot: d.PolicySnapshot,
		LedgerBefore: string(idempotency.Decided), LedgerAfter: string(idempotency.Dispatching),
		Reason: dispatchReason(predicted, d.MaxReplays, route.Name, predicted)}
	audit.Prepare(&dispatchRec)
	var written *store.EntryRecord // the entry as the intent stores it (PutEntry is the transaction's last write)
	err := spend(h, r.commitIntent(ctx, h, guarded(h, e, r.recordTxLearning(e, res, func(tx store.Tx, er *store.EntryRecord) error {
		written = er
		if er.Hold != "" {
			// A person resolved or quarantined the entry after it was read
			// (a window reads ahead): their hold stands, nothing is sent.
			return fmt.Errorf("%w: %s was put on hold (%s) while it was being decided", idempotency.ErrConflict, ref, er.Hold)
		}
		cur, err := tx.Ledger(e.IdempotencyKey)
		if err == nil {
			err = chainAgrees(tx, ref, cur)
		}
		if err != nil {
			return err
		}
		from := idempotency.Decided
		switch {
		case cur == nil:
			if _, err := tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, To: idempotency.Decided,
				EntryRef: ref, PayloadHash: d.PayloadHash}); err != nil {
				return err
			}
		case cur.State == idempotency.OutcomeUnknown && d.Ledger.Approved:
			// A person approved replaying a key whose outcome was unknown
			// (after a probe found it not committed).
			if _, err := tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, From: idempotency.OutcomeUnknown,
				To: idempotency.Decided}); err != nil {
				return err
			}
		}
		if d.Ledger.Approved {
			id, err := currentApprovalID(tx, er, ref, d.EvidenceHash)
			if err != nil {
				return err
			}
			if err := useApproval(tx, id); err != nil {
				return err
			}
		}
		if err := joinLineage(tx, e); err != nil { // its replays count for the lineage
			return err
		}
		next, err := tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, From: from,
			To: idempotency.Dispatching, PayloadHash: d.PayloadHash, Owner: owner})
		if err != nil {
			return err
		}
		er.NextAttemptAt = time.Time{} // this is the attempt that was due
		attempt, budget = next.Replays, next.Budget()
		rec := dispatchRec // a copy: the transaction may run again
		rec.LedgerBefore = string(from)
		if next.Budget() != predicted || next.Replays != predicted {
			// Not the attempt the decision's view made next: the reason
			// names the ledger's (and the record is encoded again).
			rec.Reason = dispatchReason(next.Budget(), d.MaxReplays, route.Name, next.Replays)
		}
		_, err = tx.Append(&rec)
		return err
	}, false, stored == nil))))
	if err != nil {
		endDispatch()
		if errors.Is(err, idempotency.ErrConflict) || errors.Is(err, idempotency.ErrIllegal) {
			// The ledger moved since we decided: decide again next run.
			res.Final, res.Status, res.Reason = triage.ManualReview, store.StatusPending, "ledger changed while deciding: "+err.Error()
			return nil
		}
		return err
	}

	// A dispatch that started is let finish (bounded by the target's own
	// timeout) even when the run is being stopped: an answer is worth
	// more than an outcome_unknown a person must chase. No new one
	// starts once ctx is done.
	out, err := r.send(ctx, h, route, Request{Entry: e, Key: e.IdempotencyKey, Attempt: attempt})
	if err != nil {
		endDispatch() // nothing was sent
		return err
	}
	dispatched = true
	done(&out)
	r.auditBreakers(ctx)
	res.Replays = append(res.Replays, out.Outcome.String())
	if out.Outcome == NotSent || out.TargetDown {
		res.TargetDown++
	}
	to, status := outcomeState(out.Outcome)
	if out.Outcome == NotSent {
		budget-- // it never reached the target: max_replays is untouched
	}
	// A retryable outcome under max_replays is tried again at its due
	// time; at the ceiling it waits for a person.
	var due time.Time
	exhausted := out.Outcome == Retry && budget >= d.MaxReplays
	if out.Outcome.Retryable() && !exhausted {
		due = r.Clock.Now().Add(retryDelay(d.Backoff, attempt, e.IdempotencyKey)).UTC()
	}
	reason := out.Detail
	if !due.IsZero() {
		reason = scheduledReason(due) + ": " + out.Detail
	}
	owed := "" // the write-back the entry owes, as the outcome's commit left it
	// A success the source must still be told of is owed from the moment it
	// is recorded: a run that dies before (or while) telling it leaves the
	// write-back owed, and the next run finishes it.
	_, hasWB := settlerOf(src)
	owesBack := out.Outcome == Succeeded && !out.SourceUpdated && hasWB
	detail := outcomeDetail(route.Name, attempt, out.Status, out.NewJobID, due)
	// Encoded here, outside the write lock: the transaction only links it.
	outcomeRec := audit.Record{Actor: r.Actor, Kind: audit.KindOutcome, EntryRef: ref, EntryID: e.ID,
		Source: e.Source, Key: e.IdempotencyKey, Outcome: out.Outcome.String(), Reason: out.Detail,
		LedgerBefore: string(idempotency.Dispatching), LedgerAfter: string(to), Detail: detail}
	audit.Prepare(&outcomeRec)
	// So is the entry as the outcome leaves it, from the entry as the
	// intent stored it: inside, the transaction compares the stored bytes
	// with the intent's and, where another write came between, decodes
	// and encodes it again (store.PutPrepared).
	var ahead *store.PreparedEntry
	if written != nil {
		next := *written
		applyOutcome(&next, status, reason, due, owesBack)
		ahead = r.Store.PrepareEntry(written, &next)
	}
	if err := r.commitOutcome(ctx, h, func(tx store.Tx) error {
		if _, err := tx.Transition(idempotency.Transition{Key: e.IdempotencyKey, From: idempotency.Dispatching,
			To: to, Error: out.Detail, Owner: owner, Attempt: attempt, NotSent: out.Outcome == NotSent}); err != nil {
			return err
		}
		rec := outcomeRec // a copy: the transaction may run again
		if _, err := tx.Append(&rec); err != nil {
			return err
		}
		if ahead != nil {
			put, err := tx.PutPrepared(ahead)
			if err != nil {
				return err
			}
			if put {
				owed = ahead.Next.WriteBackPending
				return nil
			}
		}
		owed, err = setOutcomeStatus(tx, ref, status, reason, due, owesBack)
		return err
	}); err != nil {
		endDispatch()
		return fmt.Errorf("record outcome of %s (left dispatching: recovery makes it outcome_unknown): %w", e.IdempotencyKey, err)
	}
	endDispatch()
	res.Status, res.Outcome, res.Reason, res.NextAttempt = status, out.Outcome.String(), reason, due

	switch out.Outcome {
	case Succeeded:
		if !out.SourceUpdated {
			r.writeBack(ctx, h, e, src, res, store.WriteBackReplayed, "", &owed)
		}
		return nil
	case HandledElsewhere:
		res.Final = triage.Skip
		return nil
	case Failed:
		res.Final = triage.Quarantine
		return nil
	case Unknown:
		res.Final = triage.ManualReview
		return nil
	}
	if exhausted {
		res.Final, res.Status = triage.ManualReview, store.StatusManualReview
		res.Reason = fmt.Sprintf("max_replays reached (%d of %d): %s", budget, d.MaxReplays, out.Detail)
		return r.record(ctx, h, e, res, nil)
	}
	return nil
}

// decisionRecord is the audit record of res's decision on e.
func (r *Reconciler) decisionRecord(e *entry.Entry, res *EntryResult) *audit.Record {
	d := &res.Decision
	input := *e
	input.Payload = nil
	return &audit.Record{Actor: r.Actor, Kind: audit.KindDecision, EntryRef: e.Ref(), EntryID: e.ID,
		Source: e.Source, Key: e.IdempotencyKey, Decision: d, Input: &input, Action: res.Final,
		Reason: lastReason(d.Reasons, res.Reason), PolicySnapshot: d.PolicySnapshot,
		LedgerBefore: d.Ledger.State, LedgerAfter: d.Ledger.State}
}

// dispatchReason is a dispatch record's reason.
func dispatchReason(budget, maxReplays int, target string, attempt int) string {
	return "replay " + strconv.Itoa(budget) + " of " + strconv.Itoa(maxReplays) + " to " + target +
		" (attempt " + strconv.Itoa(attempt) + ")"
}

// setOutcomeStatus is setStatus plus the entry's next attempt time (zero
// when no retry is scheduled), reading and writing the entry once; owesBack
// records the replay's write-back as owed. It returns the write-back the
// entry still owes, as stored.
func setOutcomeStatus(tx store.Tx, ref, status, reason string, due time.Time, owesBack bool) (owed string, err error) {
	if ref == "" {
		return "", nil
	}
	er, err := tx.Entry(ref)
	if err != nil || er == nil {
		return "", err
	}
	applyOutcome(er, status, reason, due, owesBack)
	return er.WriteBackPending, tx.PutEntry(er)
}

// applyOutcome sets what a replay's outcome changes in its entry.
func applyOutcome(er *store.EntryRecord, status, reason string, due time.Time, owesBack bool) {
	er.Status, er.Reason, er.NextAttemptAt = status, reason, due
	if owesBack && er.WriteBackPending == "" {
		er.WriteBackPending = store.WriteBackReplayed
	}
	if status == store.StatusFailed {
		er.Hold = store.HoldFailed
	}
}

// auditBreakers writes one audit record per breaker state change not yet
// audited (by this run or another sharing the breakers).
func (r *Reconciler) auditBreakers(ctx context.Context) {
	changes := r.Breakers.takeChanges()
	for i, c := range changes {
		detail, _ := json.Marshal(map[string]any{"target": c.Target, "from": c.From, "to": c.To, "at": c.At})
		err := r.Store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
			_, err := tx.Append(&audit.Record{Actor: r.Actor, Kind: audit.KindBreaker, Outcome: c.To, Detail: detail,
				Reason: fmt.Sprintf("circuit breaker of target %s: %s -> %s", c.Target, c.From, c.To)})
			return err
		})
		if err != nil {
			// Kept for the next call: a breaker change is never left
			// unaudited because one write failed.
			r.Breakers.requeue(changes[i:])
			return
		}
	}
}

func outcomeState(o Outcome) (idempotency.State, string) {
	switch o {
	case Succeeded:
		return idempotency.Succeeded, store.StatusReplayed
	case Failed:
		return idempotency.Failed, store.StatusFailed
	case Unknown:
		return idempotency.OutcomeUnknown, store.StatusUnknown
	case HandledElsewhere:
		// Committed as far as replayctl is concerned: never replayed again.
		return idempotency.Succeeded, store.StatusResolved
	}
	return idempotency.Decided, store.StatusPending // retry or not_sent: due again later
}

// writeBack tells the source the entry was replayed or resolved, after
// the store says so (the connector's Settle: remove an item file, call
// the system's own delete or resolve, delete a Redis key). A failure is kept on the entry (WriteBackPending) in
// the same transaction as its audit record, so the next run retries it.
//
// owed, when known, is the write-back the stored entry owes now (the
// caller just wrote it): a source without write-back then needs no read.
func (r *Reconciler) writeBack(ctx context.Context, h *handling, e *entry.Entry, src source.Source, res *EntryResult, kind, reason string, owed *string) {
	st, ok := settlerOf(src)
	var err error
	func() {
		defer outbound(h)() // a window's calls out stay within --max-parallel
		if ok {
			err = st.Settle(ctx, e, settlement(kind, reason))
		}
	}()
	outcome, reason := "done", "source updated: entry taken out of the source's DLQ ("+kind+")"
	pending := ""
	if err != nil {
		outcome, reason, pending = "failed", err.Error()+" (retried by the next reconcile)", kind
		res.Outcome = "write_back_failed"
	}
	if !ok && owed != nil && *owed == pending {
		return // known: nothing to change, no commit
	}
	if !ok && owed == nil && !r.owesWriteBack(ctx, e.Ref(), pending) {
		return // nothing to tell the source, nothing to change: no commit
	}
	serr := r.Store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		er, err := tx.Entry(e.Ref())
		if err != nil {
			return err
		}
		if er != nil && er.WriteBackPending != pending {
			er.WriteBackPending = pending
			if err := tx.PutEntry(er); err != nil {
				return err
			}
		}
		if !ok {
			return nil // nothing to tell a source that has no write-back
		}
		_, err = tx.Append(&audit.Record{Actor: r.Actor, Kind: audit.KindWriteBack, EntryRef: e.Ref(), EntryID: e.ID,
			Source: e.Source, Key: e.IdempotencyKey, Outcome: outcome, Reason: reason})
		return err
	})
	if serr != nil {
		// The report says the write-back's record is missing, rather
		// than that it was done or owed.
		res.Outcome = "write_back_failed"
		res.Reason = strings.TrimSpace(res.Reason + " (write-back " + outcome + " at the source, not recorded: " + serr.Error() + ")")
	}
}

// statusFor maps a final action to the entry's status.
func statusFor(a triage.Action, reasons []string) string {
	switch a {
	case triage.Quarantine:
		return store.StatusQuarantined
	case triage.RequireApproval:
		return store.StatusAwaitingApproval
	case triage.ManualReview:
		return store.StatusManualReview
	case triage.Skip:
		for _, r := range reasons {
			if r == "already committed" {
				return store.StatusReplayed
			}
		}
		return store.StatusResolved
	}
	return store.StatusPending
}

// record writes the entry, its decision (when it changed) and, for
// require_approval, the approval request, in one transaction. extra runs
// inside the same transaction.
func (r *Reconciler) record(ctx context.Context, h *handling, e *entry.Entry, res *EntryResult, extra func(store.Tx, *store.EntryRecord) error) error {
	return spend(h, r.Store.Update(context.WithoutCancel(ctx), guarded(h, e, r.recordTx(e, res, extra))))
}

// recordTx is record's transaction, to run alone or with a window's.
func (r *Reconciler) recordTx(e *entry.Entry, res *EntryResult, extra func(store.Tx, *store.EntryRecord) error) func(store.Tx) error {
	return r.recordTxLearning(e, res, extra, true, false)
}

// recordTxLearning is recordTx; learn says whether it moves a key the
// ledger never saw to decided (false: extra does, as a dispatch intent
// does, and the ledger record is read once rather than twice).
//
// isNew says the entry is not stored (the intent of an entry read for the
// first time): its record is then worked out ahead (freshEntry) and the
// transaction stores that where it holds (Tx.PutPrepared).
func (r *Reconciler) recordTxLearning(e *entry.Entry, res *EntryResult, extra func(store.Tx, *store.EntryRecord) error, learn, isNew bool) func(store.Tx) error {
	d := &res.Decision
	if res.Status == "" {
		res.Status = statusFor(res.Final, d.Reasons)
	}
	now := r.Clock.Now().UTC()
	var ahead *audit.Record
	if d.Ledger.State == "" {
		// A key the ledger never saw: its entry's decision is almost
		// always new and recorded, so its record is encoded here, outside
		// the write lock (audit.Prepare; re-encoded only if it changes).
		ahead = r.decisionRecord(e, res)
		audit.Prepare(ahead)
	}
	var fresh *store.PreparedEntry
	if isNew && ahead != nil {
		fresh = r.freshEntry(e, res, now)
	}
	return func(tx store.Tx) error {
		res.Recorded = false
		er, err := tx.Entry(e.Ref())
		if err != nil {
			return err
		}
		res.New = er == nil
		if er == nil {
			er = &store.EntryRecord{FirstSeen: now}
			if err := joinLineage(tx, e); err != nil {
				return err
			}
		}
		changed, lifted := r.shapeEntry(er, e, res, now)
		if changed {
			var rec *audit.Record
			if ahead != nil {
				cp := *ahead // a copy: the transaction may run again
				rec = &cp
			} else {
				rec = r.decisionRecord(e, res)
			}
			rec.Reason = er.Reason
			if lifted {
				// The decision itself stays the engine's, so that it can be
				// re-run from the record; the record says why it is new.
				rec.Reason = liftedReason + "; " + rec.Reason
			}
			sealed, err := tx.Append(rec)
			if err != nil {
				return err
			}
			er.LastDecision, er.Evidence, res.Recorded = sealed.Seq, d.EvidenceHash, true
		}
		fresh := fresh
		if fresh != nil && !(res.New && changed && !lifted) {
			fresh = nil // not the record worked out ahead
		}
		// The ledger learns the key (and its payload) as soon as replayctl
		// has decided on it, so a later copy with another payload is caught.
		if learn && d.Ledger.State == "" && res.Final != triage.Skip && d.IdempotencyKey != "" {
			cur, err := tx.Ledger(d.IdempotencyKey)
			if err != nil {
				return err
			}
			if cur == nil {
				if _, err := tx.Transition(idempotency.Transition{Key: d.IdempotencyKey, From: idempotency.None,
					To: idempotency.Decided, EntryRef: e.Ref(), PayloadHash: d.PayloadHash}); err != nil {
					return err
				}
			}
		}
		if res.Final == triage.RequireApproval {
			if err := r.requestApproval(tx, e, d, er, now, res); err != nil {
				return err
			}
		}
		if extra != nil {
			if err := extra(tx, er); err != nil {
				return err
			}
		}
		if fresh != nil && sameFresh(er, fresh.Next) {
			fresh.Next.LastDecision = er.LastDecision // the decision record's seq, known only now
			put, err := tx.PutPrepared(fresh)
			if err != nil || put {
				return err
			}
		}
		return tx.PutEntry(er)
	}
}

// shapeEntry sets in er, the entry's record as stored (or a new one), what
// res's decision on e changes, seen at now. It reports whether the
// decision is recorded (it differs from the last one recorded: re-deciding
// the same on every run records nothing) and whether it lifts the
// quarantine of an undecodable read. The intent's transaction and its
// record worked out ahead (recordTxLearning) both shape with it.
func (r *Reconciler) shapeEntry(er *store.EntryRecord, e *entry.Entry, res *EntryResult, now time.Time) (changed, lifted bool) {
	d := &res.Decision
	lifted = undecodableLifted(er, e)
	if lifted {
		er.Hold = ""
	}
	changed = er.Evidence != d.EvidenceHash || er.Action != res.Final || er.LastDecision == 0 || lifted
	er.Entry, er.LastSeen = *e, now
	er.Status, er.Class, er.Action = res.Status, d.Class, res.Final
	er.Group = nil // the default signature (groups.go)
	if rules := r.Engine.Rules; rules.CustomGroups() {
		k := rules.GroupOf(e, d.Class)
		er.Group = &k
	}
	er.Owner, er.ApproverGroup = d.Owner, d.ApproverGroup
	if d.Ledger.Probe != "" {
		er.Probe = d.Ledger.Probe
	}
	if res.Final == triage.Quarantine && er.Hold == "" {
		er.Hold = store.HoldQuarantine
	}
	er.Reason = lastReason(d.Reasons, res.Reason)
	return changed, lifted
}

// freshEntry works out ahead, outside the write lock, the record the
// intent's transaction stores for an entry the store does not hold yet
// (nil where the store works nothing out ahead, or the decision is not
// one recordTxLearning records as worked out): shaped as the
// transaction shapes it, its last_decision set there.
func (r *Reconciler) freshEntry(e *entry.Entry, res *EntryResult, now time.Time) *store.PreparedEntry {
	if res.Final == triage.RequireApproval {
		return nil // its transaction adds the approval request
	}
	next := &store.EntryRecord{FirstSeen: now}
	if changed, lifted := r.shapeEntry(next, e, res, now); !changed || lifted {
		return nil
	}
	next.LastDecision, next.Evidence = 1, res.Decision.EvidenceHash // the seq: inside
	return r.Store.PrepareEntry(nil, next)
}

// sameFresh reports whether er, the record a transaction built for a new
// entry, is the record freshEntry worked out ahead for it but for its
// last_decision. Both are shaped by shapeEntry from the same inputs, so
// what is compared is what could have come between: a write to a field
// after shaping (the intent's extra), or the entry read changing.
// TestSameFreshCoversEveryField holds it to EntryRecord's fields.
func sameFresh(er, ahead *store.EntryRecord) bool {
	a, b := &er.Entry, &ahead.Entry
	return er.Status == ahead.Status && er.Class == ahead.Class && er.Action == ahead.Action &&
		er.Owner == ahead.Owner && er.ApproverGroup == ahead.ApproverGroup && er.Reason == ahead.Reason &&
		er.Evidence == ahead.Evidence && er.ApprovalID == ahead.ApprovalID && er.Hold == ahead.Hold &&
		er.Probe == ahead.Probe && er.WriteBackPending == ahead.WriteBackPending && er.Settled == ahead.Settled &&
		er.FirstSeen.Equal(ahead.FirstSeen) && er.LastSeen.Equal(ahead.LastSeen) &&
		er.NextAttemptAt.Equal(ahead.NextAttemptAt) && sameGroup(er.Group, ahead.Group) &&
		a.ID == b.ID && a.Source == b.Source && a.Scope == b.Scope && a.Topic == b.Topic &&
		a.IdempotencyKey == b.IdempotencyKey && a.Message == b.Message && a.Attempts == b.Attempts &&
		len(a.Payload) == len(b.Payload)
}

// liftedReason starts the audit record of the decision that lifts it.
const liftedReason = "the record decodes now: the quarantine of its undecodable read is lifted"

// undecodableLifted reports whether stored is held only because its last
// read did not decode (triage's parse_error quarantine) and e, the same
// entry read again, decodes: the hold's reason is gone, and the entry is
// decided afresh like a new one, the decision audited. An item file read
// while its system was writing it, in place and not atomically, is the
// case (a connector's item file caught mid-write); a live record replayctl
// could not decode until an upgrade another.
func undecodableLifted(stored *store.EntryRecord, e *entry.Entry) bool {
	return stored.Hold == store.HoldQuarantine && stored.Entry.Undecodable() && stored.Class == triage.Poison &&
		!e.Undecodable()
}

// useApproval marks an approval spent: one approval, one replay.
func useApproval(tx store.Tx, id string) error {
	a, err := tx.Approval(id)
	if err != nil || a == nil {
		return err
	}
	if a.Used {
		return fmt.Errorf("%w: approval %s already used", idempotency.ErrConflict, id)
	}
	a.Used = true
	return tx.PutApproval(a)
}

func (r *Reconciler) requestApproval(tx store.Tx, e *entry.Entry, d *triage.Decision, er *store.EntryRecord, now time.Time, res *EntryResult) error {
	id, err := currentApprovalID(tx, er, e.Ref(), d.EvidenceHash)
	if err != nil {
		return err
	}
	if er.ApprovalID != "" && er.ApprovalID != id {
		if err := r.staleApproval(tx, er.ApprovalID, now); err != nil {
			return err
		}
	}
	er.ApprovalID = id
	a, err := tx.Approval(id)
	if err != nil {
		return err
	}
	if a != nil {
		// An expired request is replaced by a new one (issue 14 (b): the
		// error says "reconcile asks again", so it must), and so is a
		// stale one: the evidence changed and has come back to what it
		// was asked on, but that request was closed and can no longer be
		// granted. Any other stays.
		if a.State != store.ApprovalExpired && a.State != store.ApprovalStale &&
			(a.State != store.ApprovalPending || a.ExpiresAt.IsZero() || !now.After(a.ExpiresAt)) {
			er.MarkRejected(a) // the rejection of this evidence stands
			return nil
		}
		if a.State == store.ApprovalPending {
			a.State, a.DecidedAt, a.Reason = store.ApprovalExpired, now, "expired before a decision: a new request replaces it"
			if err := tx.PutApproval(a); err != nil {
				return err
			}
		}
		id = store.ApprovalID(e.Ref(), d.EvidenceHash+"\x00"+now.Format(time.RFC3339Nano))
		er.ApprovalID = id
	}
	prev := a
	a = &store.Approval{ID: id, EntryRef: e.Ref(), EntryID: e.ID, Source: e.Source, Key: e.IdempotencyKey,
		ApproverGroup: d.ApproverGroup, State: store.ApprovalPending, Evidence: d.EvidenceHash, Decision: *d,
		RequestedBy: r.Actor, RequestedAt: now, ExpiresAt: now.Add(r.ApprovalTTL)}
	if prev != nil {
		// A replacement keeps its requester: the scheduler asking again
		// must not let the person who raised it approve it (issue 29).
		a.RequestedBy, a.RerequestedBy = prev.RequestedBy, append(slices.Clone(prev.RerequestedBy), r.Actor)
	}
	if err := tx.PutApproval(a); err != nil {
		return err
	}
	detail, _ := json.Marshal(map[string]string{"approval_id": id, "approver_group": a.ApproverGroup})
	_, err = tx.Append(&audit.Record{Actor: r.Actor, Kind: audit.KindApproval, EntryRef: e.Ref(), EntryID: e.ID,
		Source: e.Source, Key: e.IdempotencyKey, Action: triage.RequireApproval, Outcome: "requested",
		Reason: "approval requested from " + orNone(a.ApproverGroup), PolicySnapshot: d.PolicySnapshot, Detail: detail})
	res.Outcome = "approval_requested"
	return err
}

// staleApproval closes a still-pending request whose evidence changed.
func (r *Reconciler) staleApproval(tx store.Tx, id string, now time.Time) error {
	a, err := tx.Approval(id)
	if err != nil || a == nil || a.State != store.ApprovalPending {
		return err
	}
	a.State, a.DecidedAt, a.Reason = store.ApprovalStale, now, "evidence changed: a new request replaces it"
	if err := tx.PutApproval(a); err != nil {
		return err
	}
	_, err = tx.Append(&audit.Record{Actor: r.Actor, Kind: audit.KindApproval, EntryRef: a.EntryRef, EntryID: a.EntryID,
		Source: a.Source, Key: a.Key, Outcome: store.ApprovalStale, Reason: a.Reason})
	return err
}

func orNone(s string) string {
	if s == "" {
		return "(no approver group configured)"
	}
	return s
}

func lastReason(reasons []string, override string) string {
	if override != "" {
		return override
	}
	if len(reasons) == 0 {
		return ""
	}
	return reasons[len(reasons)-1]
}

// defaults fills in unset options (once: the pacer keeps its state).
func (r *Reconciler) defaults() {
	if r.Clock == nil {
		r.Clock = SystemClock{}
	}
	if r.MaxParallel <= 0 {
		r.MaxParallel = 5
	}
	if r.ApprovalTTL <= 0 {
		r.ApprovalTTL = DefaultApprovalTTL
	}
	if r.Actor == "" {
		r.Actor = "replayctl"
	}
	if r.pace == nil {
		r.pace = newPacers(r.Rate, r.Clock)
	}
	if r.Breakers == nil {
		r.Breakers = NewBreakers(r.Clock)
	}
	if r.Breakers.Clock == nil {
		r.Breakers.Clock = r.Clock
	}
	if r.Owner == "" {
		host, _ := os.Hostname()
		r.Owner = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if r.Lease <= 0 {
		r.Lease = 2 * time.Minute
	}
}

// One reconciles a single stored entry now (`dlq replay ID`), through the
// same policy, ledger and backoff path as a run. Held or finished entries
// are refused with ErrState.
func (r *Reconciler) One(ctx context.Context, er *store.EntryRecord) (EntryResult, error) {
	switch {
	case er.Hold != "":
		return EntryResult{}, fmt.Errorf("%w: %s is %s (held: %s); release it first", ErrState, er.Entry.Ref(), er.Status, er.Hold)
	case er.Status == store.StatusReplayed:
		return EntryResult{}, fmt.Errorf("%w: %s was already replayed", ErrState, er.Entry.Ref())
	}
	r.defaults()
	if err := r.useHolds(ctx, nil); err != nil {
		return EntryResult{}, err
	}
	res, err := r.handleOne(ctx, er, nil)
	if err == nil && res.Outcome == OutcomeUnavailable {
		// Nothing was sent: say why rather than succeed doing nothing.
		return res, fmt.Errorf("%w: %s: %s", ErrState, er.Entry.Ref(), res.Reason)
	}
	return res, err
}

// handleOne handles one stored entry outside a run (single and bulk
// replays) through the same claim and the same handle as a run; pre is
// what a bulk replay's plan read and decided for it (nil: handle does).
// A person asked for it: it goes out now, whatever retry time a run
// scheduled (the breaker still holds it).
func (r *Reconciler) handleOne(ctx context.Context, er *store.EntryRecord, pre *prepared) (EntryResult, error) {
	e := er.Entry
	h := &handling{now: true}
	var (
		res EntryResult
		err error
		src source.Source
	)
	if r.ForEntry != nil {
		if s, ok := r.ForEntry(&e); ok {
			src = s
		}
	}
	if r.Store.Features().Shared {
		// The same claim as a run's: no other worker handles the entry
		// while this replay is in flight, and its lease fences our writes.
		c, ok, cerr := r.Store.ClaimRef(ctx, e.Ref(), r.Owner, r.Lease)
		if cerr != nil {
			return EntryResult{}, cerr
		}
		if !ok {
			return EntryResult{}, fmt.Errorf("%w: %s is being handled by another worker; try again later", ErrState, e.Ref())
		}
		res, err = r.handleClaim(ctx, c, src, h, pre)
	} else {
		res, err = r.handle(ctx, h, &e, src, pre)
	}
	if err == nil && res.Outcome == "in_flight" {
		return res, fmt.Errorf("%w: %s: a replay of its key is in flight; its outcome decides", ErrState, e.Ref())
	}

	return res, err
}

// sameGroup reports whether two entry records' custom groups are the same.
func sameGroup(a, b *group.Key) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
