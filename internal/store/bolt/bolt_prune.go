package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
)

var (
	// keyAuditBase holds the pruned chain's base (audit.Checkpoint JSON).
	keyAuditBase = []byte("audit_base")
	// keyPrunePending names the archive of a prune whose removals are not
	// finished; the next prune finishes them first.
	keyPrunePending = []byte("prune_pending")
)

// AuditBase implements audit.BaseReader: the base of a pruned chain, nil
// when nothing was pruned.
func (s *Bolt) AuditBase(ctx context.Context) (*audit.Checkpoint, error) {
	var base *audit.Checkpoint
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		base, err = readBase(tx)
		return err
	})
	return base, err
}

func readBase(tx *bolt.Tx) (*audit.Checkpoint, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return nil, nil
	}
	v := meta.Get(keyAuditBase)
	if v == nil {
		return nil, nil
	}
	var cp audit.Checkpoint
	if err := json.Unmarshal(v, &cp); err != nil {
		return nil, fmt.Errorf("audit base: %w", err)
	}
	return &cp, nil
}

// Prune moves what retention lets go into an archive, then removes it
// (prune.go says in which order, so that a kill loses nothing).
func (s *Bolt) Prune(ctx context.Context, o store.PruneOptions) (*store.PruneResult, error) {
	if s.ro {
		return nil, store.ErrReadOnly
	}
	return store.Prune(ctx, s, o)
}

// PendingPrune reads the mark of a prune whose removals are not finished.
func (s *Bolt) PendingPrune(context.Context) (*store.PrunePending, error) {
	var pend *store.PrunePending
	err := s.db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta != nil {
			if v := meta.Get(keyPrunePending); v != nil {
				pend = &store.PrunePending{}
				return json.Unmarshal(v, pend)
			}
		}
		return nil
	})
	return pend, err
}

// SetPending writes (nil: clears) the pending prune's mark.
func (s *Bolt) SetPending(_ context.Context, p *store.PrunePending) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if p == nil {
			return meta.Delete(keyPrunePending)
		}
		data, err := json.Marshal(p)
		if err != nil {
			return err
		}
		return meta.Put(keyPrunePending, data)
	})
	if err != nil {
		return fmt.Errorf("mark the prune: %w", err)
	}
	return nil
}

// prunable reports whether a stored entry may leave: closed, owing its
// source no write-back (the next run retries it from the entry), and
// nothing happened to it since before.
func prunable(tx *bolt.Tx, r *store.EntryRecord, before time.Time) bool {
	if r == nil || store.IsOpen(r.Status) || r.WriteBackPending != "" {
		return false
	}
	t, ok := lastAuditTime(tx, r.Entry.Ref())
	return store.ClosedBefore(r, t, ok, before)
}

// lastAuditTime is the time of the last audit record naming ref, from the
// entry's audit index.
func lastAuditTime(tx *bolt.Tx, ref string) (time.Time, bool) {
	idx, ab := tx.Bucket(bucketIdx), tx.Bucket(bucketAudit)
	if idx == nil || ab == nil {
		return time.Time{}, false
	}
	prefix := auditIndexKey(&audit.Record{EntryRef: ref})
	c := idx.Cursor()
	var k []byte
	if end := prefixEnd(prefix); end != nil {
		if k, _ = c.Seek(end); k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		if len(k) != len(prefix)+8 {
			continue
		}
		v := ab.Get(k[len(prefix):])
		if v == nil {
			return time.Time{}, false // pruned before: older than an earlier cut
		}
		var sealed struct {
			Body struct {
				Time time.Time `json:"time"`
			} `json:"body"`
		}
		if store.DecodeValue(v, &sealed) != nil {
			return time.Time{}, false
		}
		return sealed.Body.Time, true
	}
	return time.Time{}, false
}

// writeArchive writes, from one consistent read, the audit prefix, the
// prunable entries, their ledger records and approvals, and the trailer
// (writeArchiveFile).
func (s *Bolt) WriteArchive(ctx context.Context, path string, o store.PruneOptions) (res *store.PruneResult, base *audit.Checkpoint, written bool, err error) {
	return store.WriteArchiveFile(path, o, func(w *audit.ArchiveWriter, res *store.PruneResult) (*audit.Checkpoint, error) {
		var base *audit.Checkpoint
		err := s.db.View(func(tx *bolt.Tx) error {
			a := &archiver{tx: tx, w: w, before: o.Before, res: res}
			if err := a.auditPrefix(ctx, s.now().UTC()); err != nil {
				return err
			}
			if err := a.entries(ctx); err != nil {
				return err
			}
			if err := a.approvals(); err != nil {
				return err
			}
			base = a.base
			return nil
		})
		return base, err
	})
}

// archiver writes one prune's archive from one read transaction.
type archiver struct {
	tx     *bolt.Tx
	w      *audit.ArchiveWriter
	before time.Time
	res    *store.PruneResult
	base   *audit.Checkpoint // the last audit record archived
}

// auditPrefix writes the header and the chain's prefix: the records
// before the cut, up to the first that names an entry staying in the
// store, and never the head (the live chain keeps its last record, which
// the next append links to). The prefix is verified as it is read: a
// broken chain is not archived.
func (a *archiver) auditPrefix(ctx context.Context, now time.Time) error {
	tx := a.tx
	prev, err := readBase(tx)
	if err != nil {
		return err
	}
	v, from, err := store.ArchiveHeader(a.w, prev, a.before, now)
	if err != nil {
		return err
	}
	var head auditHead
	if v := tx.Bucket(bucketMeta).Get(keyAuditHead); v != nil {
		if err := json.Unmarshal(v, &head); err != nil {
			return fmt.Errorf("decode audit head: %w", err)
		}
	}
	ab, eb := tx.Bucket(bucketAudit), tx.Bucket(bucketEntries)
	if ab == nil {
		return nil
	}
	stays := map[string]bool{} // a bounded cache of entry lookups
	c := ab.Cursor()
	for k, val := c.Seek(seqKey(from)); k != nil; k, val = c.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(k) != 8 {
			return fmt.Errorf("audit record with a bad key %x: run audit verify; nothing was pruned", k)
		}
		var sealed audit.Sealed
		if err := store.DecodeValue(val, &sealed); err != nil {
			return fmt.Errorf("audit record %d undecodable (%v): run audit verify; nothing was pruned", binary.BigEndian.Uint64(k), err)
		}
		if b := v.Next(binary.BigEndian.Uint64(k), sealed); b != nil {
			return fmt.Errorf("%w: nothing was pruned (a broken chain is not archived)", b)
		}
		rec, err := sealed.Open()
		if err != nil {
			return err
		}
		if !rec.Time.Before(a.before) || sealed.Seq >= head.Seq {
			return nil
		}
		if ref := rec.EntryRef; ref != "" {
			st, seen := stays[ref]
			if !seen {
				se, err := getJSON[store.StoredEntry](eb, store.DBKey(ref))
				if err != nil {
					return err
				}
				st = se != nil && !prunable(tx, &se.EntryRecord, a.before)
				if len(stays) > 100_000 {
					clear(stays)
				}
				stays[ref] = st
			}
			if st {
				a.res.HeldAt, a.res.HeldBy = sealed.Seq, ref
				return nil
			}
		}
		if err := a.w.Write(&audit.ArchiveLine{Type: audit.LineAudit, Seq: sealed.Seq, Prev: sealed.Prev, Hash: sealed.Hash, Record: sealed.Body}); err != nil {
			return err
		}
		a.res.Audit++
		a.base = &audit.Checkpoint{Seq: sealed.Seq, Head: sealed.Hash, Time: now}
	}
	return nil
}

// entries writes every prunable entry, payload included, and its key's
// ledger record. An entry that cannot be read whole is left in place.
func (a *archiver) entries(ctx context.Context) error {
	eb, lb := a.tx.Bucket(bucketEntries), a.tx.Bucket(bucketLedger)
	if eb == nil {
		return nil
	}
	c := eb.Cursor()
	for k, val := c.First(); k != nil; k, val = c.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		var se store.StoredEntry
		if store.DecodeValue(val, &se) != nil || !prunable(a.tx, &se.EntryRecord, a.before) {
			continue
		}
		payload, err := readPayload(a.tx, k)
		if err != nil {
			continue
		}
		er := store.DecodeEntry(&se, payload)
		data, err := json.Marshal(er)
		if err != nil {
			return err
		}
		if err := a.w.Write(&audit.ArchiveLine{Type: audit.LineEntry, Entry: data}); err != nil {
			return err
		}
		a.res.Entries++
		key := er.Entry.IdempotencyKey
		if key == "" || lb == nil {
			continue
		}
		if lr, err := getJSON[idempotency.Record](lb, store.DBKey(key)); err == nil && lr != nil {
			data, err := json.Marshal(lr)
			if err != nil {
				return err
			}
			if err := a.w.Write(&audit.ArchiveLine{Type: audit.LineLedger, Ledger: data}); err != nil {
				return err
			}
			a.res.Ledger++
		}
	}
	return nil
}

// approvals writes the approval requests of prunable entries.
func (a *archiver) approvals() error {
	apb, eb := a.tx.Bucket(bucketApprovals), a.tx.Bucket(bucketEntries)
	if apb == nil {
		return nil
	}
	c := apb.Cursor()
	for _, val := c.First(); val != nil; _, val = c.Next() {
		var ap store.Approval
		if store.DecodeValue(val, &ap) != nil {
			continue
		}
		se, err := getJSON[store.StoredEntry](eb, store.DBKey(ap.EntryRef))
		if err != nil || se == nil || !prunable(a.tx, &se.EntryRecord, a.before) {
			continue // an approval of an entry that stays (or is gone already) stays
		}
		data, err := json.Marshal(&ap)
		if err != nil {
			return err
		}
		if err := a.w.Write(&audit.ArchiveLine{Type: audit.LineApproval, Approval: data}); err != nil {
			return err
		}
		a.res.Approvals++
	}
	return nil
}

// RemoveBatch removes, in one transaction, the approvals and entries
// named that still qualify (approvals first: they name their entry, which
// must still be there to be checked).
func (s *Bolt) RemoveBatch(_ context.Context, refs, approvals []string, before time.Time, res *store.PruneResult) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		setFillPercent(tx)
		eb, apb := tx.Bucket(bucketEntries), tx.Bucket(bucketApprovals)
		for _, id := range approvals {
			a, err := getJSON[store.Approval](apb, store.DBKey(id))
			if err != nil || a == nil {
				continue
			}
			if se, err := getJSON[store.StoredEntry](eb, store.DBKey(a.EntryRef)); err != nil || se != nil && !prunable(tx, &se.EntryRecord, before) {
				continue
			}
			if err := reindexApproval(tx, a, nil); err != nil {
				return err
			}
			if err := apb.Delete(store.DBKey(id)); err != nil {
				return err
			}
			res.Approvals++
		}
		for _, ref := range refs {
			key := store.DBKey(ref)
			se, err := getJSON[store.StoredEntry](eb, key)
			if err != nil || se == nil || !prunable(tx, &se.EntryRecord, before) {
				continue // changed since it was archived: it stays (and is in the archive too)
			}
			if err := reindex(tx, &se.EntryRecord, nil, s.now().UTC()); err != nil {
				return err
			}
			if err := eb.Delete(key); err != nil {
				return err
			}
			for _, name := range [][]byte{bucketPayloadsZ, bucketPayloads} {
				if b := tx.Bucket(name); b != nil {
					if err := b.Delete(key); err != nil {
						return err
					}
				}
			}
			res.Entries++
		}
		return nil
	})
}

// SizeNow is the file's size after a prune.
func (s *Bolt) SizeNow(context.Context) (int64, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// MoveBase makes b the chain's base (when it is ahead of the current one)
// and removes the records up to it, with their index keys, in bounded
// transactions.
func (s *Bolt) MoveBase(ctx context.Context, b *audit.Checkpoint, batch int, afterBase func()) (int, error) {
	err := s.db.Update(func(tx *bolt.Tx) error {
		cur, err := readBase(tx)
		if err != nil || cur != nil && cur.Seq >= b.Seq {
			return err
		}
		// The base must be a record of this chain: the archive was
		// written from it, and nothing rewrites the chain in between.
		ab := tx.Bucket(bucketAudit)
		if v := ab.Get(seqKey(b.Seq)); v != nil {
			var sealed audit.Sealed
			if err := store.DecodeValue(v, &sealed); err != nil || sealed.Hash != b.Head {
				return fmt.Errorf("record %d is not the archive's base any more: nothing of the chain was removed", b.Seq)
			}
		}
		data, err := json.Marshal(b)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyAuditBase, data)
	})
	if err != nil {
		return 0, err
	}
	if afterBase != nil {
		afterBase()
	}
	removed := 0
	for {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		n := 0
		err := s.db.Update(func(tx *bolt.Tx) error {
			setFillPercent(tx)
			ab, idx := tx.Bucket(bucketAudit), tx.Bucket(bucketIdx)
			c := ab.Cursor()
			for k, v := c.First(); k != nil && n < batch; k, v = c.First() {
				if len(k) != 8 || binary.BigEndian.Uint64(k) > b.Seq {
					break // past the base, or a key this code does not understand: left alone
				}
				var sealed audit.Sealed
				if store.DecodeValue(v, &sealed) == nil && idx != nil {
					if rec, err := sealed.Open(); err == nil {
						rec.Seq = binary.BigEndian.Uint64(k)
						keys := auditViewKeys(&rec)
						if ik := auditIndexKey(&rec); ik != nil {
							keys = append(keys, append(ik, seqKey(rec.Seq)...))
						}
						for _, key := range keys {
							if err := idx.Delete(key); err != nil {
								return err
							}
						}
					}
				}
				if err := c.Delete(); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		removed += n
		if err != nil || n < batch {
			return removed, err
		}
	}
}
