package store

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
)

// What both backends' prunes share (bolt_prune.go, pg_prune.go): which
// entry may leave, and how an archive reaches its file.

// Pruner is a backend's side of a prune: its pending mark, its archive's
// one consistent read, and the removals (steps 3-6 of Prune).
type Pruner interface {
	PendingPrune(ctx context.Context) (*PrunePending, error)
	SetPending(ctx context.Context, p *PrunePending) error
	WriteArchive(ctx context.Context, path string, o PruneOptions) (res *PruneResult, base *audit.Checkpoint, written bool, err error)
	// RemoveBatch removes the entries and approvals named, each only if
	// it still qualifies, in one transaction, counting them in res.
	RemoveBatch(ctx context.Context, refs, approvalIDs []string, before time.Time, res *PruneResult) error
	MoveBase(ctx context.Context, b *audit.Checkpoint, batch int, afterBase func()) (int, error)
	// SizeNow is the store's size on disk after the prune.
	SizeNow(ctx context.Context) (int64, error)
}

// removeArchived removes what the archive holds and still qualifies,
// moves the base, and clears the pending mark (steps 3-6 of prune). What
// leaves is read back from the archive, so nothing leaves that it lacks.
func removeArchived(ctx context.Context, s Pruner, pend *PrunePending, o PruneOptions, fresh bool, base *audit.Checkpoint) (*PruneResult, error) {
	batch := o.Batch
	res := &PruneResult{Archive: pend.Archive, Base: base}
	// Nothing is removed unless the archive is all there.
	if !fresh {
		b, err := archiveBase(pend.Archive)
		if err != nil {
			return nil, err
		}
		res.Base = b
	}
	f, err := os.Open(pend.Archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var refs, approvals []string
	flush := func() error {
		if len(refs) == 0 && len(approvals) == 0 {
			return nil
		}
		err := s.RemoveBatch(ctx, refs, approvals, pend.Before, res)
		refs, approvals = refs[:0], approvals[:0]
		return err
	}
	err = audit.ReadArchive(bufio.NewReader(f), func(l *audit.ArchiveLine) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch l.Type {
		case audit.LineEntry:
			var er EntryRecord
			if err := json.Unmarshal(l.Entry, &er); err != nil {
				return fmt.Errorf("archive entry: %w", err)
			}
			refs = append(refs, er.Entry.Ref())
		case audit.LineApproval:
			var a Approval
			if err := json.Unmarshal(l.Approval, &a); err != nil {
				return fmt.Errorf("archive approval: %w", err)
			}
			approvals = append(approvals, a.ID)
		case audit.LineLedger:
			res.Ledger++
		}
		if len(refs)+len(approvals) >= batch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, fmt.Errorf("prune: %w (run prune again to finish; the archive %s holds everything)", err, pend.Archive)
	}
	if b := res.Base; b != nil {
		n, err := s.MoveBase(ctx, b, batch, o.AfterBase)
		res.Audit = n
		if err != nil {
			return nil, fmt.Errorf("prune the audit chain: %w (run prune again to finish)", err)
		}
	}
	if err := s.SetPending(ctx, nil); err != nil {
		return nil, err
	}
	if res.SizeAfter, err = s.SizeNow(ctx); err != nil {
		return nil, err
	}
	return res, nil
}

// Prune moves what retention lets go into an archive, then removes it,
// on either backend.
//
// Order, so that a kill at any point loses nothing and leaves a chain that
// verifies: (1) the prune is marked pending in the store, naming its
// archive; (2) the archive is written to a temporary file, synced and
// renamed into place, and nothing is removed unless it is complete (a
// mark whose archive is missing or unfinished is dropped by the next
// Prune); (3) entries and approvals are removed in bounded transactions,
// each re-checking that the entry still qualifies; (4) the chain's base
// moves to the archive's last record, in a transaction of its own, before
// (5) the records up to it are removed in bounded transactions (records
// at or below the base are not walked by verify); (6) the mark is
// cleared. A prune that finds a mark with a complete archive finishes
// that prune first (steps 3-6 are idempotent) and does nothing else.
//
// Ledger records are archived but kept: they are what stops a key that
// succeeded from being sent again if its entry is read again.
func Prune(ctx context.Context, s Pruner, o PruneOptions) (*PruneResult, error) {
	if o.Batch <= 0 {
		o.Batch = DefaultPruneBatch
	}
	pend, err := s.PendingPrune(ctx)
	if err != nil {
		return nil, fmt.Errorf("read pending prune: %w", err)
	}
	if pend != nil {
		res, err := removeArchived(ctx, s, pend, o, false, nil)
		if !errors.Is(err, errNoArchive) {
			if res != nil {
				res.Resumed = true
			}
			return res, err
		}
		// Killed before its archive was complete: nothing was removed.
		if err := s.SetPending(ctx, nil); err != nil {
			return nil, err
		}
	}
	if o.Archive == "" {
		return nil, errors.New("prune: an archive file is required")
	}
	if _, err := os.Stat(o.Archive); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrArchiveExists, o.Archive)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	abs, err := filepath.Abs(o.Archive)
	if err != nil {
		return nil, err
	}
	// Marked before the archive is written, so that a kill between its
	// rename and the removals still finds it; a mark whose archive is
	// missing or unfinished is dropped (nothing was removed).
	pend = &PrunePending{Archive: abs, Before: o.Before.UTC()}
	if err := s.SetPending(ctx, pend); err != nil {
		return nil, err
	}
	res, base, written, err := s.WriteArchive(ctx, abs, o)
	if err != nil || !written {
		if cerr := s.SetPending(ctx, nil); err == nil {
			err = cerr
		}
		return res, err
	}
	if o.AfterArchive != nil {
		o.AfterArchive()
	}
	done, err := removeArchived(ctx, s, pend, o, true, base)
	if done != nil {
		done.HeldAt, done.HeldBy = res.HeldAt, res.HeldBy
	}
	return done, err
}

// ClosedBefore reports whether a closed entry owing no write-back may
// leave: nothing happened to it (seen, or an audit record about it at
// lastAudit when hasAudit) since before.
func ClosedBefore(r *EntryRecord, lastAudit time.Time, hasAudit bool, before time.Time) bool {
	if r == nil || IsOpen(r.Status) || r.WriteBackPending != "" {
		return false
	}
	last := r.LastSeen
	if r.FirstSeen.After(last) {
		last = r.FirstSeen
	}
	if hasAudit && lastAudit.After(last) {
		last = lastAudit
	}
	return last.Before(before)
}

// WriteArchiveFile writes an archive through fill, which writes the
// header, the audit prefix, the entries with their ledger records and the
// approvals from one consistent read, counting them in res, and returns
// the base (the last audit record archived). The trailer follows, and the
// file is a temporary one renamed into place once synced. With nothing
// to prune it writes no file and says written false.
func WriteArchiveFile(path string, o PruneOptions, fill func(w *audit.ArchiveWriter, res *PruneResult) (*audit.Checkpoint, error)) (res *PruneResult, base *audit.Checkpoint, written bool, err error) {
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, nil, false, fmt.Errorf("create archive: %w", err)
	}
	defer os.Remove(tmp) // a no-op once renamed
	defer f.Close()
	w := audit.NewArchiveWriter(f)
	res = &PruneResult{Archive: path}
	base, err = fill(w, res)
	if err != nil {
		return nil, nil, false, err
	}
	if base != nil && len(o.Key) > 0 {
		base.MAC = audit.BaseMAC(o.Key, base.Seq, base.Head)
	}
	counts := map[string]int{"audit": res.Audit, "entries": res.Entries, "ledger": res.Ledger, "approvals": res.Approvals}
	if err := w.Write(&audit.ArchiveLine{Type: audit.LineTrailer, Base: base, Counts: counts}); err != nil {
		return nil, nil, false, err
	}
	if res.Audit == 0 && res.Entries == 0 && res.Approvals == 0 {
		res.Archive = ""
		return res, nil, false, nil
	}
	if err := w.Close(); err != nil {
		return nil, nil, false, fmt.Errorf("write archive: %w", err)
	}
	if err := f.Sync(); err != nil {
		return nil, nil, false, fmt.Errorf("sync archive: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, nil, false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, nil, false, fmt.Errorf("archive: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return nil, nil, false, fmt.Errorf("sync archive directory: %w", err)
		}
	}
	return res, base, true, nil
}

// ArchiveHeader writes an archive's header line and returns the verifier
// its audit prefix is checked with and the first seq it holds: after the
// base of an earlier prune (prev), or from genesis.
func ArchiveHeader(w *audit.ArchiveWriter, prev *audit.Checkpoint, before, now time.Time) (*audit.Verifier, uint64, error) {
	v, from, prevHead := audit.NewVerifier(), uint64(1), audit.Genesis
	if prev != nil {
		v, from, prevHead = audit.VerifierAt(prev.Seq, prev.Head), prev.Seq+1, prev.Head
	}
	err := w.Write(&audit.ArchiveLine{Type: audit.LineHeader, Version: audit.ArchiveVersion, Created: now,
		Before: before.UTC(), FromSeq: from, Prev: prevHead})
	return v, from, err
}

// DefaultPruneBatch bounds what one prune transaction removes: bbolt's
// single writer is held for milliseconds, not for the whole prune.
const DefaultPruneBatch = 1000

// ErrArchiveExists: prune never overwrites an archive (it may hold the
// only copy of records already removed).
var ErrArchiveExists = errors.New("archive file already exists")

// PruneOptions say what leaves the live store.
type PruneOptions struct {
	// Before: closed entries (replayed, resolved) whose last activity
	// (last seen, last audit record) is before it leave, with their
	// approvals; so do the audit records before it, as one prefix of the
	// chain that stops at the first record of an entry that stays.
	Before time.Time
	// Archive is the file the removed records are written to first.
	Archive string
	// Key signs the archive's base (the live chain's new start).
	Key []byte
	// Batch bounds the removals of one transaction (DefaultPruneBatch).
	Batch int
	// AfterArchive, when set, is called once the archive is durable and
	// the prune is marked pending, before anything is removed (tests).
	AfterArchive func()
	// AfterBase, when set, is called once the chain's base has moved,
	// before the records up to it are removed (tests).
	AfterBase func()
}

// PruneResult says what a prune did.
type PruneResult struct {
	Archive   string            `json:"archive"`
	Resumed   bool              `json:"resumed,omitempty"`
	Entries   int               `json:"entries"`
	Ledger    int               `json:"ledger_records_archived"`
	Approvals int               `json:"approvals"`
	Audit     int               `json:"audit_records"`
	Base      *audit.Checkpoint `json:"base,omitempty"`
	// HeldAt is the audit record the chain's prefix stopped at (an entry
	// that stays, open or closed too recently), 0 when none did.
	HeldAt    uint64 `json:"held_at,omitempty"`
	HeldBy    string `json:"held_by,omitempty"`
	SizeAfter int64  `json:"file_bytes"`
}

type PrunePending struct {
	Archive string    `json:"archive"`
	Before  time.Time `json:"before"`
}

// errNoArchive: a pending prune's archive is missing or unfinished.
var errNoArchive = errors.New("the pending prune's archive is missing or unfinished")

// archiveBase checks that an archive is complete and returns its base:
// errNoArchive when it is missing or was never finished.
func archiveBase(path string) (*audit.Checkpoint, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoArchive
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var base *audit.Checkpoint
	err = audit.ReadArchive(bufio.NewReader(f), func(l *audit.ArchiveLine) error {
		if l.Type == audit.LineTrailer {
			base = l.Base
		}
		return nil
	})
	switch {
	case errors.Is(err, audit.ErrArchiveIncomplete):
		return nil, errNoArchive
	case err != nil:
		return nil, fmt.Errorf("the pending prune's archive %s is unreadable (%w): nothing more is removed until it reads whole (restore it from a copy)", path, err)
	}
	return base, nil
}
