package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
)

// The claim model (STYLE.md: "A claim is one atomic step", "Outcomes are
// guarded writes"), in one place for every path that dispatches: a run on
// either backend, `dlq replay ID`, the API/UI single replay and bulk replay.
//
//   - The dispatching ledger record names its owner (the store's process
//     instance, host:pid:nonce) and its attempt (the record's replay count).
//   - Recovery turns a dispatching record into outcome_unknown only when its
//     owner is gone: on bbolt, any owner but this process's instance (the
//     file lock keeps every other process out); on a shared store, the
//     caller holds the entry's claim, so the previous lease expired.
//   - The outcome write is a compare-and-set on (dispatching, attempt,
//     owner): a stale outcome is refused, never booked on another attempt.

// instanceOf names the process instance that owns this store's dispatches.
func instanceOf(s Store, fallback string) string {
	if in := s.Instance(); in != "" {
		return in
	}
	return fallback
}

// inFlightHere reports whether rec is a dispatch this process is still
// making: a bbolt store's dispatching record owned by its own instance.
// (On a shared store the lease decides, and whoever holds the claim may
// recover.)
func inFlightHere(s Store, rec *idempotency.Record) bool {
	if rec == nil || rec.State != idempotency.Dispatching || s.Features().Shared {
		return false
	}
	if rec.Owner == "" || rec.Owner != s.Instance() {
		return false
	}
	// Ours, but only in flight while a dispatch is under way: one whose
	// outcome write failed is recoverable without a restart.
	return s.Dispatching(rec.Key)
}

// errInFlight: the entry's key is being dispatched by this process right
// now (another single replay, a bulk replay or a run); nothing is decided
// or written until its outcome is known.
var errInFlight = errors.New("a replay of this entry is in flight")

// recoverRecord turns rec (dispatching, owner gone) into outcome_unknown,
// audited, unless it changed meanwhile.
func recoverRecord(ctx context.Context, s Store, actor string, rec *idempotency.Record, why string) error {
	return s.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Ledger(rec.Key)
		if err != nil || cur == nil || cur.State != idempotency.Dispatching || inFlightHere(s, cur) {
			return err
		}
		next, err := tx.Transition(idempotency.Transition{Key: cur.Key, From: idempotency.Dispatching,
			To: idempotency.OutcomeUnknown, Owner: cur.Owner, Attempt: cur.Replays,
			Error: "dispatch owner gone before its outcome was written: outcome unknown"})
		if err != nil {
			return err
		}
		if _, err := tx.Append(&audit.Record{Actor: actor, Kind: audit.KindRecovery, EntryRef: cur.EntryRef, Key: cur.Key,
			LedgerBefore: string(idempotency.Dispatching), LedgerAfter: string(next.State), Outcome: string(next.State),
			Reason: fmt.Sprintf("%s (attempt %d by %s)", why, cur.Replays, orUnknownOwner(cur.Owner))}); err != nil {
			return err
		}
		return setStatus(tx, cur.EntryRef, store.StatusUnknown, "a replay may or may not have happened: probe or person")
	})
}

// recoverLease is how long a recovery on a shared store holds the entry's
// claim: the time of one transaction, with room.
const recoverLease = time.Minute

// recoverAbandoned recovers rec, a dispatching record found by a sweep
// (Recover). On bbolt its owner is gone unless it is this process's
// (inFlightHere). On a shared store the record may be a live worker's:
// the sweep first takes the entry's claim, which it gets only when no
// live lease holds the entry (its worker died, or its lease ran out, and
// no one claimed it since), and writes the recovery under that claim's
// fence, as the worker that claims the entry next would (recoverKey);
// an entry another worker holds gives errInFlight and is left alone.
func recoverAbandoned(ctx context.Context, s Store, actor string, rec *idempotency.Record) error {
	const why = "dispatch found without an outcome, its process gone"
	if !s.Features().Shared {
		return recoverRecord(ctx, s, actor, rec, why)
	}
	if rec.EntryRef == "" {
		return errInFlight // no entry to claim: the claim of one with its key recovers it
	}
	c, ok, err := s.ClaimRef(ctx, rec.EntryRef, s.Instance(), recoverLease)
	if err != nil || !ok {
		return cmp.Or(err, errInFlight)
	}
	f := store.Fence{Ref: rec.EntryRef, Token: c.Token, Key: c.Entry.Entry.IdempotencyKey}
	err = recoverRecord(store.WithFence(ctx, f), s, actor, rec, why+" (its lease ended)")
	if rerr := s.Release(context.WithoutCancel(ctx), rec.EntryRef, c.Token); rerr != nil {
		// The claim then ends with its lease.
		err = errors.Join(err, fmt.Errorf("release the recovery's claim on %s: %w", rec.EntryRef, rerr))
	}
	return err
}

func orUnknownOwner(s string) string {
	if s == "" {
		return "an unnamed process"
	}
	return s
}

// recoverKey recovers the entry's own key when its dispatch was left by an
// owner that is gone; a dispatch in flight in this process gives
// errInFlight.
func (r *Reconciler) recoverKey(ctx context.Context, key, ref, why string) error {
	// Almost always there is nothing to recover: find out with a read, and
	// take a (serialized) write transaction only when there is.
	var rec *idempotency.Record
	if err := r.Store.View(ctx, func(tx store.Tx) error {
		var err error
		rec, err = tx.Ledger(key)
		return err
	}); err != nil || rec == nil || rec.State != idempotency.Dispatching {
		return err
	}
	if ref != "" && rec.EntryRef != "" && rec.EntryRef != ref {
		// Another entry with the same key made this dispatch: it is that
		// entry's to recover (under its own claim); this one waits.
		if r.Store.Features().Shared {
			return errInFlight
		}
	}
	if inFlightHere(r.Store, rec) {
		return errInFlight
	}
	err := recoverRecord(ctx, r.Store, r.Actor, rec, why)
	if errors.Is(err, idempotency.ErrConflict) {
		return nil // its outcome arrived meanwhile
	}
	return err
}
