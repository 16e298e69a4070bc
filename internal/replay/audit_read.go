package replay

import (
	"context"
	"errors"
	"slices"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// auditBatch bounds the records read back at once from index seqs.
const auditBatch = 1000

// EachAudit calls fn, oldest first, with the records from seq `from` on
// that q matches, read from the narrowest index that holds them: an
// entry's records from the per-entry audit index, an actor's, a kind's or
// a time range's from the audit indexes; the chain only when q names none
// of those (an action alone, or nothing). It yields what audit.EachFrom
// yields walking the whole chain (`audit list`, GET /api/audit and the
// console share it).
func EachAudit(ctx context.Context, s Inventory, from uint64, q audit.Query, fn func(audit.Record) error) error {
	open := func(_ uint64, sealed audit.Sealed, derr error) error {
		if derr != nil {
			return nil // audit verify reports where
		}
		rec, err := sealed.Open()
		if err != nil || !q.Match(&rec) {
			return nil
		}
		return fn(rec)
	}
	var seqs []uint64
	switch {
	case q.Entry != "":
		refs := []string{q.Entry}
		er, err := Find(ctx, s, q.Entry)
		switch {
		case err == nil:
			refs = []string{er.Entry.Ref()}
		case errors.Is(err, ErrAmbiguous):
			if refs, err = s.RefsByID(ctx, q.Entry); err != nil {
				return err
			}
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		for _, ref := range refs {
			if err := s.EntryAudit(ctx, ref, "", func(seq uint64, _ audit.Sealed, _ error) error {
				seqs = append(seqs, seq)
				return nil
			}); err != nil {
				return err
			}
		}
		slices.Sort(seqs)
		seqs = slices.Compact(seqs)
	case q.Actor != "" || q.Kind != "" || !q.Since.IsZero():
		var err error
		if seqs, err = s.AuditSeqs(ctx, store.AuditFilter{Actor: q.Actor, Kind: q.Kind, Since: q.Since}); err != nil {
			return err
		}
	default:
		return s.AuditRange(ctx, from, open)
	}
	i, _ := slices.BinarySearch(seqs, from)
	for seqs = seqs[i:]; len(seqs) > 0; seqs = seqs[min(len(seqs), auditBatch):] {
		if err := s.AuditRecords(ctx, seqs[:min(len(seqs), auditBatch)], open); err != nil {
			return err
		}
	}
	return nil
}
