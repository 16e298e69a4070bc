package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// The console's views, kept in the idx bucket in the same transaction as
// the entry, audit record or approval they describe (so a page reads a
// range instead of scanning):
//
//	'L' lp(state) order(last failure) ikey(ref) -> entries key when it differs
//	    every entry by last failure, per state (sort=oldest|newest)
//	'F' order(first seen) ikey(ref) -> entries key when it differs
//	    every entry by first-seen time (the age filter)
//	'A' lp(actor) seq, 'K' lp(kind) seq, 'T' order(time) seq
//	    audit records by actor, kind and time
//	'P' lp(state) order(requested at) ikey(id) -> approvals key when it differs
//	    approval requests by stored state
//
// order(t) is timeKey(t), and eight zero bytes for a zero time (first).
const (
	dimLastFailure = 'L'
	dimFirstSeen   = 'F'
	dimAuditActor  = 'A'
	dimAuditKind   = 'K'
	dimAuditTime   = 'T'
)

// ageSetCap bounds an age range (first seen, last failure) that Page
// holds in memory as a dimension. Whether a range fits is only known by
// reading it, so this is also what a page spends finding out that a
// range does not fit (at 1M entries a 100k cap cost 40 ms a page); a
// larger range stays a check on the other dimensions' walk, where a
// range that wide rules out few entries.
const ageSetCap = 16_384

// viewFacets adds the entry's view keys to idx (see entryFacets).
func viewFacets(r *store.EntryRecord, ik, val []byte, idx map[string][]byte) {
	idx[string(append(append(store.DimPrefix(dimLastFailure, r.Status), store.OrderKey(store.LastFailure(r))...), ik...))] = val
	idx[string(append(append([]byte{dimFirstSeen}, store.OrderKey(r.FirstSeen)...), ik...))] = val
}

// auditViewKeys are the view keys of one audit record.
func auditViewKeys(r *audit.Record) [][]byte {
	seq := seqKey(r.Seq)
	keys := make([][]byte, auditViews)
	for i := range keys {
		keys[i] = appendAuditViewKey(nil, r, i, seq)
	}
	return keys
}

// auditViews is how many view keys an audit record has.
const auditViews = 3

// appendAuditViewKey appends r's view key i (of auditViews; seq is
// seqKey(r.Seq)) to dst.
func appendAuditViewKey(dst []byte, r *audit.Record, i int, seq []byte) []byte {
	switch i {
	case 0:
		dst = store.AppendLP(append(dst, dimAuditActor), store.ValKey(r.Actor))
	case 1:
		dst = store.AppendLP(append(dst, dimAuditKind), store.ValKey(r.Kind))
	default:
		dst = store.AppendOrderKey(append(dst, dimAuditTime), r.Time)
	}
	return append(dst, seq...)
}

// putAuditViewKeys puts auditViewKeys(r), each built in scratch in turn
// (bbolt's Put copies its key).
func putAuditViewKeys(idx *bolt.Bucket, scratch []byte, r *audit.Record, seq []byte) error {
	for i := range auditViews {
		if err := idx.Put(appendAuditViewKey(scratch[:0], r, i, seq), nil); err != nil {
			return err
		}
	}
	return nil
}

// reindexApprovalState moves the request's state key.
func reindexApprovalState(idx *bolt.Bucket, old, new *store.Approval) error {
	if old != nil {
		if err := idx.Delete(store.ApprovalStateKey(old)); err != nil {
			return err
		}
	}
	if new == nil {
		return nil
	}
	var val []byte
	if ik, ek := store.IKey(new.ID), store.DBKey(new.ID); !bytes.Equal(ik, ek) {
		val = ek
	}
	return idx.Put(store.ApprovalStateKey(new), val)
}

// memRef is one ref of a range read into memory.
type memRef struct{ ref, val []byte }

func (h *valueCursor) memSeek(target []byte, strict bool) {
	h.i = sort.Search(len(h.mem), func(i int) bool { return bytes.Compare(h.mem[i].ref, target) >= 0 })
	if strict && h.i < len(h.mem) && bytes.Equal(h.mem[h.i].ref, target) {
		h.i++
	}
}

func (h *valueCursor) next() {
	if h.c == nil {
		h.i++
		return
	}
	h.k, h.v = h.c.Next()
}

func (h *valueCursor) val() []byte {
	if h.c == nil {
		if h.i < len(h.mem) {
			return h.mem[h.i].val
		}
		return nil
	}
	return h.v
}

// ageDim reads the entries first seen before f.FirstSeenBefore from the
// first-seen index, in ref order, positioned after `after`; nil when the
// filter has no age or the range holds more than limit entries.
func ageDim(idx *bolt.Bucket, f *store.EntryFilter, after []byte, limit int) *valueCursor {
	if f.FirstSeenBefore.IsZero() || limit <= 0 {
		return nil
	}
	end := store.OrderKey(f.FirstSeenBefore)
	var mem []memRef
	c := idx.Cursor()
	for k, v := c.Seek([]byte{dimFirstSeen}); len(k) > 9 && k[0] == dimFirstSeen && bytes.Compare(k[1:9], end) < 0; k, v = c.Next() {
		if len(mem) == limit {
			return nil
		}
		mem = append(mem, memRef{ref: bytes.Clone(k[9:]), val: bytes.Clone(v)})
	}
	sort.Slice(mem, func(i, j int) bool { return bytes.Compare(mem[i].ref, mem[j].ref) < 0 })
	h := &valueCursor{mem: mem}
	if after != nil {
		h.memSeek(after, true)
	}
	return h
}

// failedByDim reads the entries of these states whose last failure is at
// or before f.LastFailedBy from the last-failure index, in ref order,
// positioned after `after`; nil when the filter has no such age or the
// ranges hold more than limit entries.
func failedByDim(idx *bolt.Bucket, f *store.EntryFilter, states []string, after []byte, limit int) *valueCursor {
	if f.LastFailedBy.IsZero() || limit <= 0 {
		return nil
	}
	end := store.OrderKey(f.LastFailedBy)
	var mem []memRef
	c := idx.Cursor()
	for _, st := range states {
		prefix := store.DimPrefix(dimLastFailure, st)
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) >= len(prefix)+8; k, v = c.Next() {
			if bytes.Compare(k[len(prefix):len(prefix)+8], end) > 0 {
				break
			}
			if len(mem) == limit {
				return nil
			}
			mem = append(mem, memRef{ref: bytes.Clone(k[len(prefix)+8:]), val: bytes.Clone(v)})
		}
	}
	sort.Slice(mem, func(i, j int) bool { return bytes.Compare(mem[i].ref, mem[j].ref) < 0 })
	h := &valueCursor{mem: mem}
	if after != nil {
		h.memSeek(after, true)
	}
	return h
}

// prefixEnd is the first key after every key starting with p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no key follows
}

// rangeCursor walks one prefix's keys forward or backward.
type rangeCursor struct {
	c      *bolt.Cursor
	prefix []byte
	back   bool
	k, v   []byte
	// upTo, when set, ends the range at suffixes whose first 8 bytes
	// (the order key) are above it.
	upTo []byte
}

// start positions the cursor at the first key (in its direction) past
// `after` (a suffix; nil: from the start).
func (r *rangeCursor) start(after []byte) {
	if r.back && r.upTo != nil {
		// Walking back from the bound: everything after it is out of range.
		if bound := prefixEnd(r.upTo); bound != nil && (after == nil || bytes.Compare(after, bound) > 0) {
			after = bound
		}
	}
	if !r.back {
		if after == nil {
			r.k, r.v = r.c.Seek(r.prefix)
		} else {
			at := append(bytes.Clone(r.prefix), after...)
			r.k, r.v = r.c.Seek(at)
			if bytes.Equal(r.k, at) {
				r.k, r.v = r.c.Next()
			}
		}
	} else {
		var k []byte
		if after == nil {
			if end := prefixEnd(r.prefix); end != nil {
				k, _ = r.c.Seek(end)
			}
		} else {
			k, _ = r.c.Seek(append(bytes.Clone(r.prefix), after...))
		}
		if k == nil {
			r.k, r.v = r.c.Last()
		} else {
			r.k, r.v = r.c.Prev()
		}
	}
	r.clip()
}

// clip ends the walk outside the prefix or past the bound.
func (r *rangeCursor) clip() {
	if r.k != nil && !bytes.HasPrefix(r.k, r.prefix) {
		r.k = nil
	}
	if r.k != nil && r.upTo != nil && (len(r.k) < len(r.prefix)+8 || bytes.Compare(r.k[len(r.prefix):len(r.prefix)+8], r.upTo) > 0) {
		r.k = nil
	}
}

func (r *rangeCursor) suffix() []byte {
	if r.k == nil {
		return nil
	}
	return r.k[len(r.prefix):]
}

func (r *rangeCursor) advance() {
	if r.back {
		r.k, r.v = r.c.Prev()
	} else {
		r.k, r.v = r.c.Next()
	}
	r.clip()
}

// SortedPage returns up to limit entries matching f after cursor, by last
// failure (oldest first, or newest first), ties by ref. It merges the
// per-state ranges of the last-failure index the filter's states select
// and reads only the entries it walks past: a page's cost follows how
// many entries it skips, not the store. The total is the counters' (as
// Page's).
func (s *Bolt) SortedPage(ctx context.Context, f store.EntryFilter, newest bool, cursor string, limit int) (*store.EntryPage, error) {
	limit, after, err := store.SortedPageArgs(&f, cursor, limit)
	if err != nil {
		return nil, err
	}
	page := &store.EntryPage{Items: []*store.EntryRecord{}}
	err = s.db.View(func(tx *bolt.Tx) error {
		idx, eb, choices, _, err := pageDims(tx, &f, page)
		if err != nil {
			return err
		}
		var heads []*rangeCursor
		for _, st := range choices[0].Values {
			h := &rangeCursor{c: idx.Cursor(), prefix: store.DimPrefix(dimLastFailure, st), back: newest}
			if !f.LastFailedBy.IsZero() {
				// An age is a bound on this very order.
				h.upTo = store.OrderKey(f.LastFailedBy)
			}
			h.start(after)
			heads = append(heads, h)
		}
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			var at *rangeCursor
			for _, h := range heads {
				if h.k == nil {
					continue
				}
				if at == nil {
					at = h
					continue
				}
				c := bytes.Compare(h.suffix(), at.suffix())
				if (!newest && c < 0) || (newest && c > 0) {
					at = h
				}
			}
			if at == nil {
				return nil
			}
			sfx := bytes.Clone(at.suffix())
			ek := sfx[8:]
			if len(at.v) > 0 {
				ek = at.v
			}
			added, full, err := take(page, eb, ek, &f, limit)
			if err != nil {
				return err
			}
			if full {
				page.Next = store.EncodeCursor(after)
				return nil
			}
			if added {
				after = sfx
			}
			at.advance()
		}
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// AuditSeqs returns the seqs of the audit records matching f, oldest
// first, from the audit indexes: it walks one index range (the time
// range's, else the actor's, else the kind's) and checks the others by
// key, reading no record.
func (s *Bolt) AuditSeqs(ctx context.Context, f store.AuditFilter) ([]uint64, error) {
	var seqs []uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if !indexed(tx) {
			return store.ErrNotIndexed
		}
		idx := tx.Bucket(bucketIdx)
		timed := !f.Since.IsZero() || !f.Until.IsZero()
		inTime := func(tk []byte) bool {
			return (f.Since.IsZero() || bytes.Compare(tk, store.OrderKey(f.Since)) >= 0) &&
				(f.Until.IsZero() || bytes.Compare(tk, store.OrderKey(f.Until)) <= 0)
		}
		// One range is walked; the actor and kind are checked by key.
		keep := func(seq uint64) bool {
			sk := seqKey(seq)
			if f.Actor != "" && idx.Get(append(store.DimPrefix(dimAuditActor, f.Actor), sk...)) == nil {
				return false
			}
			return f.Kind == "" || idx.Get(append(store.DimPrefix(dimAuditKind, f.Kind), sk...)) != nil
		}
		c := idx.Cursor()
		walkSeqs := func(prefix []byte) error {
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				if len(k) != len(prefix)+8 {
					continue
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				if seq := binary.BigEndian.Uint64(k[len(prefix):]); keep(seq) {
					seqs = append(seqs, seq)
				}
			}
			return nil
		}
		switch {
		case timed:
			from := []byte{dimAuditTime}
			if !f.Since.IsZero() {
				from = append(from, store.OrderKey(f.Since)...)
			}
			for k, _ := c.Seek(from); len(k) == 17 && k[0] == dimAuditTime && inTime(k[1:9]); k, _ = c.Next() {
				if err := ctx.Err(); err != nil {
					return err
				}
				if seq := binary.BigEndian.Uint64(k[9:]); keep(seq) {
					seqs = append(seqs, seq)
				}
			}
			sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
			return nil
		case f.Actor != "":
			return walkSeqs(store.DimPrefix(dimAuditActor, f.Actor))
		case f.Kind != "":
			return walkSeqs(store.DimPrefix(dimAuditKind, f.Kind))
		}
		return fmt.Errorf("audit seqs: no indexed filter given")
	})
	return seqs, err
}

// ApprovalsByState calls fn with the requests whose stored state is one
// of states (case-insensitive; none: every state), each state's oldest
// first, from the index by state. A pending request past its expiry is
// stored as pending: callers that show "expired" ask for both.
func (s *Bolt) ApprovalsByState(ctx context.Context, states []string, fn func(*store.Approval) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		if !indexed(tx) {
			return store.ErrNotIndexed
		}
		idx, ab := tx.Bucket(bucketIdx), tx.Bucket(bucketApprovals)
		want := func(st string) bool {
			if len(states) == 0 {
				return true
			}
			for _, w := range states {
				if strings.EqualFold(w, st) {
					return true
				}
			}
			return false
		}
		c := idx.Cursor()
		for k, v := c.Seek([]byte{store.DimApprovalState}); k != nil && k[0] == store.DimApprovalState; {
			st, rest, ok := readLP(k[1:])
			if !ok || len(rest) < 8 {
				k, v = c.Next()
				continue
			}
			prefix := k[:len(k)-len(rest)]
			if !want(st) {
				// Skip the whole state.
				end := prefixEnd(prefix)
				if end == nil {
					return nil
				}
				k, v = c.Seek(end)
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			ak := rest[8:]
			if len(v) > 0 {
				ak = v
			}
			if raw := ab.Get(ak); raw != nil {
				var a store.Approval
				if err := store.DecodeValue(raw, &a); err != nil {
					return fmt.Errorf("decode approval %q: %w", ak, err)
				}
				if err := fn(&a); err != nil {
					return err
				}
			}
			k, v = c.Next()
		}
		return nil
	})
}

// AuditRecords calls fn with the stored records of these seqs, in the
// order given (a page that AuditSeqs selected), without walking the chain.
// A seq with no record is skipped.
func (s *Bolt) AuditRecords(ctx context.Context, seqs []uint64, fn func(seq uint64, rec audit.Sealed, decodeErr error) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		ab := tx.Bucket(bucketAudit)
		if ab == nil {
			return nil
		}
		return eachAuditSeq(ctx, ab, seqs, fn)
	})
}

// eachAuditSeq calls fn with the audit record of each seq, in the order
// given (EntryAudit, AuditRecords); a seq with no record is skipped and a
// record that does not decode is passed on with its error.
func eachAuditSeq(ctx context.Context, ab *bolt.Bucket, seqs []uint64, fn func(seq uint64, rec audit.Sealed, decodeErr error) error) error {
	for _, seq := range seqs {
		if err := ctx.Err(); err != nil {
			return err
		}
		v := ab.Get(seqKey(seq))
		if v == nil {
			continue
		}
		var sealed audit.Sealed
		derr := store.DecodeValue(v, &sealed)
		if err := fn(seq, sealed, derr); err != nil {
			return err
		}
	}
	return nil
}
