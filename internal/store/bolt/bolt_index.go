package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unsafe"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// The indexes and counters live in three buckets, written in the same
// transaction as the entry or audit record they describe, so they can
// never disagree with the data after a crash.
//
//	idx:      dim byte + lp(value) + ikey(ref) -> entries key when it differs from ikey
//	          ('s' state, 'c' class, 'a' action, 'o' source, 't' topic), and
//	          'f' + 8-byte first-seen + ikey for open entries (oldest first)
//	counters: 'n' entries; 'c' lp(source) lp(class) lp(action) lp(state);
//	          't' lp(topic); 'o' lp(source) lp(topic) (open only); 'd' day;
//	          'g' lp(signature); 'D' decisions; 'X' denied; 'O' outcome;
//	          'h' + 8-byte hour + kind ('i','r','D','X', 'O'+outcome,
//	          'I'+class, 'R'+class: see bolt_series.go)
//	sigmeta:  lp(signature) -> {class, example} of its first entry
//
// and the console's views, in bolt_views.go.
//
// lp is a uvarint length then the bytes: values may hold any byte.
var (
	bucketIdx      = []byte("idx")
	bucketCounters = []byte("counters")
	bucketSigMeta  = []byte("sigmeta")
	keyIndexVer    = []byte("index_version")
)

const indexVersion = "5" // 5: failure groups (bolt_groups.go)

// readLP reads one lp value from b, returning it and the rest.
func readLP(b []byte) (string, []byte, bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return "", nil, false
	}
	return string(b[w : w+int(n)]), b[w+int(n):], true
}

func timeFromKey(k []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(k)^(1<<63))).UTC()
}

// facets are the index keys and counter keys one entry record stands for.
type facets struct {
	idx      map[string][]byte // index key -> value
	counters []string
	sig      string
	open     bool
}

func entryFacets(r *store.EntryRecord) facets {
	if r == nil {
		return facets{}
	}
	e := &r.Entry
	ref := e.Ref()
	ik, ek := store.IKey(ref), store.DBKey(ref)
	var val []byte
	if !bytes.Equal(ik, ek) {
		val = ek
	}
	// Sized for what a record has (six dimensions, oldest, two views, its
	// group; five to ten counters): growing them was a tenth of the work.
	f := facets{idx: make(map[string][]byte, 10), counters: make([]string, 0, 10), sig: store.Signature(r), open: store.IsOpen(r.Status)}
	for _, d := range []struct {
		dim byte
		v   string
	}{{store.DimState, r.Status}, {store.DimClass, string(r.Class)}, {store.DimAction, string(r.Action)}, {store.DimSource, e.Source}, {store.DimTopic, e.Topic}, {store.DimID, e.ID}} {
		f.idx[string(append(store.DimPrefix(d.dim, d.v), ik...))] = val
	}
	cell := store.AppendLP(store.AppendLP(store.AppendLP(store.AppendLP([]byte{'c'}, e.Source), string(r.Class)), string(r.Action)), r.Status)
	f.counters = append(f.counters, "n", string(cell), string(store.AppendLP([]byte{'t'}, store.ValKey(e.Topic))),
		"d"+r.FirstSeen.UTC().Format("2006-01-02"), string(store.AppendLP([]byte{'g'}, store.ValKey(f.sig))))
	if f.open {
		if !r.FirstSeen.IsZero() { // an age needs a first-seen time
			f.idx[string(append(append([]byte{store.DimOldest}, store.TimeKey(r.FirstSeen)...), ik...))] = val
		}
		f.counters = append(f.counters, string(store.AppendLP(store.AppendLP([]byte{'o'}, e.Source), store.ValKey(e.Topic))))
	}
	f.counters = append(f.counters, classInflowKeys(r)...)
	viewFacets(r, ik, val, f.idx)
	groupFacets(r, ik, val, &f)
	return f
}

func hourKey(t time.Time, kind string) []byte {
	return appendHourKey(make([]byte, 0, 9+len(kind)), t, kind)
}

// appendHourKey appends hourKey(t, kind) to dst.
func appendHourKey(dst []byte, t time.Time, kind string) []byte {
	dst = append(dst, 'h')
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.UTC().Truncate(time.Hour).Unix()))
	return append(dst, kind...)
}

// counts takes a write's counter deltas. A write transaction gathers them
// (pending) and applies each key's sum once, when the transaction is
// flushed (issue 16: a replay window of 32 entries moved the same cell,
// topic, day and hour counters 32 times each, a bbolt lookup and put
// apiece, all inside bbolt's single write lock); nil pending applies each
// delta at once (the index migration). Nothing reads the counters bucket
// inside a write transaction but through counts, so the sums are what a
// sequence of addCount calls would have left: counters never go below
// zero in a consistent store, so a key dropped at zero part way and
// created again ends the same as one summed.
type counts struct {
	b       *bolt.Bucket
	pending map[string]int64
}

// add adds delta to the counter key.
func (c *counts) add(key []byte, delta int64) error {
	if c.pending == nil {
		return addCount(c.b, key, delta)
	}
	c.pending[string(key)] += delta
	return nil
}

// addKey is add for a key held as a string (facets keep them so).
func (c *counts) addKey(key string, delta int64) error {
	if c.pending == nil {
		return addCount(c.b, []byte(key), delta)
	}
	c.pending[key] += delta
	return nil
}

// countOf is how many times k is in keys.
func countOf(keys []string, k string) int64 {
	n := int64(0)
	for _, x := range keys {
		if x == k {
			n++
		}
	}
	return n
}

// present reports whether the counter key is above zero, pending deltas
// included.
func (c *counts) present(key []byte) bool {
	return readCount(c.b.Get(key))+c.pending[string(key)] > 0
}

// apply writes the pending sums, in key order (neighbouring counters share
// pages), and forgets them.
func (c *counts) apply() error {
	if len(c.pending) == 0 {
		return nil
	}
	keys := make([]string, 0, len(c.pending))
	for k, d := range c.pending {
		if d != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := addCount(c.b, []byte(k), c.pending[k]); err != nil {
			return err
		}
	}
	clear(c.pending)
	return nil
}

// addCount adds delta to a counter, deleting it at zero so enumerations
// only see values that are present.
func addCount(b *bolt.Bucket, key []byte, delta int64) error {
	n := readCount(b.Get(key)) + delta
	if n <= 0 {
		return b.Delete(key)
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(n))
	return b.Put(key, v[:])
}

func readCount(v []byte) int64 {
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

// reindex moves the entry's index keys and counters from old to new (nil
// old: a new entry; nil new: none) in the caller's transaction.
func reindex(tx *bolt.Tx, old, new *store.EntryRecord, now time.Time) error {
	cnt := tx.Bucket(bucketCounters)
	if cnt == nil {
		return store.ErrReadOnly
	}
	return reindexFacets(tx, &counts{b: cnt}, old != nil, entryFacets(old), new, entryFacets(new), now)
}

// reindexFacets is reindex with the facets already known: a write
// transaction keeps those of the entry records it read (boltTx.old), so
// PutEntry does not decode the old record again.
func reindexFacets(tx *bolt.Tx, cnt *counts, hadOld bool, of facets, new *store.EntryRecord, nf facets, now time.Time) error {
	idx, sm := tx.Bucket(bucketIdx), tx.Bucket(bucketSigMeta)
	if idx == nil || cnt == nil || sm == nil {
		return store.ErrReadOnly
	}
	for k := range of.idx {
		if _, keep := nf.idx[k]; !keep {
			if err := idx.Delete(keyBytes(k)); err != nil {
				return err
			}
		}
	}
	for k, v := range nf.idx {
		if _, had := of.idx[k]; !had {
			if err := idx.Put(keyBytes(k), v); err != nil {
				return err
			}
		}
	}
	// Each counter key moves by its count in the new facets less its
	// count in the old, taken at its first appearance in either. A
	// record has about ten keys: comparing them pairwise is cheaper,
	// inside the write lock, than the map it used to take.
	move := func(k string, d int64) error {
		if d == 0 {
			return nil
		}
		if d > 0 && k[0] == 'g' {
			if err := keepExample(sm, cnt.present([]byte(k)), k[1:], string(new.Class), new.Entry.Ref()); err != nil {
				return err
			}
		}
		return cnt.addKey(k, d)
	}
	for i, k := range of.counters {
		if slices.Contains(of.counters[:i], k) {
			continue
		}
		if err := move(k, countOf(nf.counters, k)-countOf(of.counters, k)); err != nil {
			return err
		}
	}
	for i, k := range nf.counters {
		if slices.Contains(nf.counters[:i], k) || slices.Contains(of.counters, k) {
			continue
		}
		if err := move(k, countOf(nf.counters, k)); err != nil {
			return err
		}
	}
	switch {
	case !hadOld && new != nil:
		at := new.FirstSeen
		if at.IsZero() {
			at = now
		}
		return cnt.add(hourKey(at, "i"), 1)
	case hadOld && new != nil && of.open && !nf.open:
		if err := cnt.add(hourKey(now, "r"), 1); err != nil {
			return err
		}
		return cnt.add(drainedClassKey(now, new), 1)
	}
	return nil
}

// keyBytes is k's bytes without a copy, for bbolt's Put, which copies
// the key it is given, and Delete, which keeps none: neither writes to
// it. (Converting each index key was an allocation per key inside the
// write lock.)
func keyBytes(k string) []byte { return unsafe.Slice(unsafe.StringData(k), len(k)) }

func pendingApprovalKey(a *store.Approval) []byte {
	return append(append([]byte{store.DimPendingApproval}, store.TimeKey(a.RequestedAt)...), store.IKey(a.ID)...)
}

// reindexApproval keeps the index of open approval requests.
func reindexApproval(tx *bolt.Tx, old, new *store.Approval) error {
	idx := tx.Bucket(bucketIdx)
	if idx == nil {
		return store.ErrReadOnly
	}
	if err := reindexApprovalState(idx, old, new); err != nil {
		return err
	}
	if old != nil && old.State == store.ApprovalPending {
		if err := idx.Delete(pendingApprovalKey(old)); err != nil {
			return err
		}
	}
	if new != nil && new.State == store.ApprovalPending {
		var val []byte
		if ik, ek := store.IKey(new.ID), store.DBKey(new.ID); !bytes.Equal(ik, ek) {
			val = ek
		}
		return idx.Put(pendingApprovalKey(new), val)
	}
	return nil
}

// PendingApprovals calls fn with the open approval requests, oldest
// first, from their index: a scrape reads the open ones, not every
// request ever made.
func (s *Bolt) PendingApprovals(ctx context.Context, fn func(*store.Approval) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		if !indexed(tx) {
			return store.ErrNotIndexed
		}
		idx, ab := tx.Bucket(bucketIdx), tx.Bucket(bucketApprovals)
		c := idx.Cursor()
		for k, v := c.Seek([]byte{store.DimPendingApproval}); len(k) > 9 && k[0] == store.DimPendingApproval; k, v = c.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			ak := k[9:]
			if len(v) > 0 {
				ak = v
			}
			raw := ab.Get(ak)
			if raw == nil {
				continue
			}
			var a store.Approval
			if err := store.DecodeValue(raw, &a); err != nil {
				return fmt.Errorf("decode approval %q: %w", ak, err)
			}
			if err := fn(&a); err != nil {
				return err
			}
		}
		return nil
	})
}

// keepExample names a signature's class and example: its smallest ref (as
// a scan in ref order, and PostgreSQL, find it), whatever order concurrent
// writers commit in. counted says the signature already has entries.
//
// It runs inside the write lock for every new entry (issue 33), so the
// record is read and written without reflection where it can be: the
// bytes are json.Marshal's (FuzzSigMetaAsEncodingJSON).
func keepExample(sm *bolt.Bucket, counted bool, sig, class, ref string) error {
	if old := sm.Get(keyBytes(sig)); old != nil && counted {
		if ex, ok := sigExample(old); ok {
			if string(ex) <= ref {
				return nil
			}
		} else {
			var cur sigMeta
			if err := json.Unmarshal(old, &cur); err == nil && cur.Example <= ref {
				return nil
			}
		}
	}
	var scratch [256]byte
	return sm.Put(keyBytes(sig), appendSigMeta(scratch[:0], class, ref))
}

// appendSigMeta appends json.Marshal(sigMeta{class, example}).
func appendSigMeta(dst []byte, class, example string) []byte {
	dst = audit.AppendJSONString(append(dst, `{"class":`...), class)
	dst = audit.AppendJSONString(append(dst, `,"example":`...), example)
	return append(dst, '}')
}

// sigExample is the example of a signature's record as appendSigMeta
// writes it, read without decoding it: ok only for exactly
// {"class":"C","example":"E"} with neither C nor E holding a quote or a
// backslash (JSON that always decodes, to E); json.Unmarshal reads any
// other form.
func sigExample(v []byte) (example []byte, ok bool) {
	const head, sep = `{"class":"`, `","example":"`
	if !bytes.HasPrefix(v, []byte(head)) || !bytes.HasSuffix(v, []byte(`"}`)) {
		return nil, false
	}
	i := bytes.Index(v, []byte(sep))
	if i < len(head) || i+len(sep) > len(v)-2 {
		return nil, false
	}
	class, ex := v[len(head):i], v[i+len(sep):len(v)-2]
	if bytes.ContainsAny(class, "\\\"") || bytes.ContainsAny(ex, "\\\"") {
		return nil, false
	}
	return ex, true
}

type sigMeta struct {
	Class   string `json:"class"`
	Example string `json:"example"`
}

// auditIndexKey is the index key naming the entry an audit record is
// about (nil when it names none).
func auditIndexKey(r *audit.Record) []byte { return appendAuditIndexKey(nil, r) }

// appendAuditIndexKey appends auditIndexKey(r) to dst (nothing when it
// names no entry).
func appendAuditIndexKey(dst []byte, r *audit.Record) []byte {
	switch {
	case r.EntryRef != "":
		return store.AppendLP(append(dst, store.DimAuditRef), string(store.IKey(r.EntryRef)))
	case r.Key != "":
		return store.AppendLP(append(dst, store.DimAuditKey), string(store.IKey(r.Key)))
	}
	return dst
}

// countAudit counts the record and indexes it under its entry. Its keys
// are built in one scratch buffer: bbolt's Put copies the key it is given
// (and Delete keeps none), so one buffer serves every key in turn (issue
// 33: the keys were a dozen allocations per record, inside the lock).
func countAudit(tx *bolt.Tx, cnt *counts, r *audit.Record) error {
	idx := tx.Bucket(bucketIdx)
	if cnt == nil || idx == nil {
		return store.ErrReadOnly
	}
	var scratch [192]byte
	seq := seqKey(r.Seq)
	if k := appendAuditIndexKey(scratch[:0], r); len(k) > 0 {
		if err := idx.Put(append(k, seq...), nil); err != nil {
			return err
		}
	}
	if err := putAuditViewKeys(idx, scratch[:0], r, seq); err != nil {
		return err
	}
	dec, den, out := store.AuditCounts(r)
	add := func(kind string) error {
		// The total ("D", "X", "O"+outcome) and its hour.
		if err := cnt.add(append(scratch[:0], kind...), 1); err != nil {
			return err
		}
		return cnt.add(appendHourKey(scratch[:0], r.Time, kind), 1)
	}
	if dec {
		if err := add("D"); err != nil {
			return err
		}
	}
	if den {
		if err := add("X"); err != nil {
			return err
		}
	}
	if out != "" {
		if err := add("O" + out); err != nil {
			return err
		}
	}
	return nil
}

// indexed reports whether the file's indexes are complete.
func indexed(tx *bolt.Tx) bool {
	meta := tx.Bucket(bucketMeta)
	return meta != nil && string(meta.Get(keyIndexVer)) == indexVersion && tx.Bucket(bucketIdx) != nil
}

// migrateChunk bounds one migration transaction (bbolt keeps a
// transaction's dirty pages in memory).
const migrateChunk = 5000

// ensureIndex builds the indexes and counters of a file written before
// they existed, once, in chunks. A crash part way leaves the version unset
// and the next open starts over from empty buckets.
func (s *Bolt) ensureIndex(ctx context.Context) error {
	done := false
	if err := s.db.View(func(tx *bolt.Tx) error { done = indexed(tx); return nil }); err != nil || done {
		return err
	}
	// Drained counts are events, not a property of the entries: carry them
	// over the rebuild.
	var drained map[string][]byte
	if err := s.db.View(func(tx *bolt.Tx) error { drained = keptSeries(tx); return nil }); err != nil {
		return fmt.Errorf("index %s: %w", s.path, err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketIdx, bucketCounters, bucketSigMeta} {
			if tx.Bucket(b) != nil {
				if err := tx.DeleteBucket(b); err != nil {
					return err
				}
			}
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		for k, v := range drained {
			if err := tx.Bucket(bucketCounters).Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index %s: %w", s.path, err)
	}
	var after []byte
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := 0
		err := s.db.Update(func(tx *bolt.Tx) error {
			eb, pb := tx.Bucket(bucketEntries), tx.Bucket(bucketPayloads)
			type item struct {
				k  []byte
				se store.StoredEntry
			}
			var items []item
			c := eb.Cursor()
			k, v := c.First()
			if after != nil {
				k, v = c.Seek(after)
				if bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(items) < migrateChunk; k, v = c.Next() {
				var se store.StoredEntry
				if err := store.DecodeValue(v, &se); err != nil {
					return fmt.Errorf("decode entry %q: %w", k, err)
				}
				items = append(items, item{bytes.Clone(k), se})
			}
			for _, it := range items {
				// An older file kept payloads inline: move them out, so
				// listing never decodes a payload.
				if it.se.PayloadBytes != nil {
					if err := pb.Put(it.k, it.se.PayloadBytes); err != nil {
						return err
					}
					it.se.PayloadBytes = nil
					if err := putJSON(eb, it.k, &it.se); err != nil {
						return err
					}
				}
				r := it.se.EntryRecord
				if err := reindex(tx, nil, &r, s.now()); err != nil {
					return err
				}
				after = it.k
			}
			n = len(items)
			return nil
		})
		if err != nil {
			return fmt.Errorf("index %s: %w", s.path, err)
		}
		if n < migrateChunk {
			break
		}
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketApprovals).ForEach(func(k, v []byte) error {
			var a store.Approval
			if err := store.DecodeValue(v, &a); err != nil {
				return nil // unreadable: listed by Approvals, never indexed
			}
			return reindexApproval(tx, nil, &a)
		})
	}); err != nil {
		return fmt.Errorf("index %s: %w", s.path, err)
	}
	var from uint64 = 1
	for {
		var recs []audit.Record
		err := s.AuditRange(ctx, from, func(seq uint64, sealed audit.Sealed, derr error) error {
			if len(recs) == migrateChunk {
				return errStop
			}
			from = seq + 1
			if derr != nil {
				return nil
			}
			if rec, err := sealed.Open(); err == nil {
				recs = append(recs, rec)
			}
			return nil
		})
		if err != nil && err != errStop {
			return fmt.Errorf("index %s: %w", s.path, err)
		}
		if err := s.db.Update(func(tx *bolt.Tx) error {
			cnt := &counts{b: tx.Bucket(bucketCounters)}
			for i := range recs {
				if err := countAudit(tx, cnt, &recs[i]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("index %s: %w", s.path, err)
		}
		if err != errStop {
			break
		}
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyIndexVer, []byte(indexVersion)) })
}

type stopErr struct{}

func (stopErr) Error() string { return "stop" }

var errStop error = stopErr{}

// cellRow is a decoded cell counter.
func readCells(cnt *bolt.Bucket) []store.Cell {
	var cells []store.Cell
	c := cnt.Cursor()
	for k, v := c.Seek([]byte{'c'}); k != nil && k[0] == 'c'; k, v = c.Next() {
		src, rest, ok1 := readLP(k[1:])
		class, rest, ok2 := readLP(rest)
		action, rest, ok3 := readLP(rest)
		state, _, ok4 := readLP(rest)
		if ok1 && ok2 && ok3 && ok4 {
			cells = append(cells, store.Cell{Source: src, Class: class, Action: action, State: state, N: readCount(v)})
		}
	}
	return cells
}

func readTopics(cnt *bolt.Bucket) map[string]int64 {
	out := map[string]int64{}
	c := cnt.Cursor()
	for k, v := c.Seek([]byte{'t'}); k != nil && k[0] == 't'; k, v = c.Next() {
		if t, _, ok := readLP(k[1:]); ok {
			out[t] = readCount(v)
		}
	}
	return out
}

// Counters returns the running counts (ErrNotIndexed on an old file
// opened read-only).
func (s *Bolt) Counters(ctx context.Context) (*store.Counters, error) {
	out := &store.Counters{Topics: map[string]int64{}, Days: map[string]int64{}, Outcomes: map[string]int64{}, Cells: []store.Cell{}, Open: []store.Depth{}, Signatures: []store.SignatureCount{}}
	err := s.db.View(func(tx *bolt.Tx) error {
		if !indexed(tx) {
			return store.ErrNotIndexed
		}
		cnt, sm, idx := tx.Bucket(bucketCounters), tx.Bucket(bucketSigMeta), tx.Bucket(bucketIdx)
		out.Entries = readCount(cnt.Get([]byte("n")))
		out.Decisions = readCount(cnt.Get([]byte("D")))
		out.Denied = readCount(cnt.Get([]byte("X")))
		out.Cells = append(out.Cells, readCells(cnt)...)
		out.Topics = readTopics(cnt)
		out.Open = append(out.Open, readOpen(cnt)...)
		c := cnt.Cursor()
		for k, v := c.Seek([]byte{'d'}); k != nil && k[0] == 'd'; k, v = c.Next() {
			out.Days[string(k[1:])] = readCount(v)
		}
		for k, v := c.Seek([]byte{'O'}); k != nil && k[0] == 'O'; k, v = c.Next() {
			out.Outcomes[string(k[1:])] = readCount(v)
		}
		for k, v := c.Seek([]byte{'g'}); k != nil && k[0] == 'g'; k, v = c.Next() {
			sig, _, ok := readLP(k[1:])
			if !ok {
				continue
			}
			sc := store.SignatureCount{Signature: sig, N: readCount(v)}
			var m sigMeta
			if mv := sm.Get(k[1:]); mv != nil && json.Unmarshal(mv, &m) == nil {
				sc.Class, sc.Example = m.Class, m.Example
			}
			out.Signatures = append(out.Signatures, sc)
		}
		out.OldestOpen = oldestOpenFailure(idx) // bolt_lastfail.go
		return ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out.Signatures, func(i, j int) bool {
		a, b := out.Signatures[i], out.Signatures[j]
		if a.N != b.N {
			return a.N > b.N
		}
		return a.Signature < b.Signature
	})
	return out, nil
}

// Series returns the hours in [from, to] that saw any activity.
func (s *Bolt) Series(ctx context.Context, from, to time.Time) ([]store.HourCount, error) {
	var out []store.HourCount
	err := s.db.View(func(tx *bolt.Tx) error {
		if !indexed(tx) {
			return store.ErrNotIndexed
		}
		end := hourKey(to, "\xff")
		c := tx.Bucket(bucketCounters).Cursor()
		for k, v := c.Seek(hourKey(from, "")); k != nil && len(k) > 9 && k[0] == 'h' && bytes.Compare(k, end) <= 0; k, v = c.Next() {
			hour := time.Unix(int64(binary.BigEndian.Uint64(k[1:9])), 0).UTC()
			if len(out) == 0 || !out[len(out)-1].Hour.Equal(hour) {
				out = append(out, store.HourCount{Hour: hour})
			}
			h, n := &out[len(out)-1], readCount(v)
			switch kind := string(k[9:]); {
			case kind == "i":
				h.Inflow = n
			case kind == "r":
				h.Drained = n
			case strings.HasPrefix(kind, "I"):
				h.AddClass(&h.InflowByClass, kind[1:], n)
			case strings.HasPrefix(kind, "R"):
				h.AddClass(&h.DrainedByClass, kind[1:], n)
			case kind == "D":
				h.Decisions = n
			case kind == "X":
				h.Denied = n
			case strings.HasPrefix(kind, "O"):
				if h.Outcomes == nil {
					h.Outcomes = map[string]int64{}
				}
				h.Outcomes[kind[1:]] = n
			}
		}
		return ctx.Err()
	})
	return out, err
}

// valueCursor walks the index range of one value of a dimension.
type valueCursor struct {
	c      *bolt.Cursor
	prefix []byte
	k, v   []byte
	// mem, when c is nil, is a range read beforehand, in ref order (the
	// age filter's first-seen range, see ageDim).
	mem []memRef
	i   int
}

func (h *valueCursor) ref() []byte {
	if h.c == nil {
		if h.i < len(h.mem) {
			return h.mem[h.i].ref
		}
		return nil
	}
	if h.k == nil || !bytes.HasPrefix(h.k, h.prefix) {
		return nil
	}
	return h.k[len(h.prefix):]
}

// seek moves to the first ref >= target (> target when strict).
func (h *valueCursor) seek(target []byte, strict bool) {
	if h.c == nil {
		h.memSeek(target, strict)
		return
	}
	h.k, h.v = h.c.Seek(append(bytes.Clone(h.prefix), target...))
	if strict {
		if r := h.ref(); r != nil && bytes.Equal(r, target) {
			h.k, h.v = h.c.Next()
		}
	}
}

// dimCursor is the union of a dimension's values, in ref order.
type dimCursor []*valueCursor

// min returns the smallest ref under any value, and its cursor.
func (d dimCursor) min() ([]byte, *valueCursor) {
	var best []byte
	var at *valueCursor
	for _, h := range d {
		if r := h.ref(); r != nil && (best == nil || bytes.Compare(r, best) < 0) {
			best, at = r, h
		}
	}
	return best, at
}

// seek moves every value cursor behind target up to it.
func (d dimCursor) seek(target []byte) {
	for _, h := range d {
		if r := h.ref(); r != nil && bytes.Compare(r, target) < 0 {
			h.seek(target, false)
		}
	}
}

// pageDims reads what a page of f starts from (Page, SortedPage): the
// index and entry buckets, each dimension's values and the counters'
// total, which it also sets as the page's total.
func pageDims(tx *bolt.Tx, f *store.EntryFilter, page *store.EntryPage) (idx, eb *bolt.Bucket, choices []store.DimChoice, total int64, err error) {
	if !indexed(tx) {
		return nil, nil, nil, 0, store.ErrNotIndexed
	}
	cnt := tx.Bucket(bucketCounters)
	var topics map[string]int64
	if f.HasTopic() {
		topics = readTopics(cnt)
	}
	choices, total, exact := store.ResolveDims(f, readCells(cnt), topics)
	page.Total, page.TotalExact = total, exact
	return tx.Bucket(bucketIdx), tx.Bucket(bucketEntries), choices, total, nil
}

// Page returns up to limit entries matching f after cursor, in ref order.
// Every dimension the filter names is an index range (a union over its
// values); Page intersects them by leapfrogging (each dimension seeks to
// the largest ref another one proposes), reads only the payload-less
// records that are in all of them, and stops at limit+1 matches: its cost
// follows the page, not the store.
func (s *Bolt) Page(ctx context.Context, f store.EntryFilter, cursor string, limit int) (*store.EntryPage, error) {
	if limit <= 0 {
		limit = 20
	}
	after, err := store.DecodeCursor(cursor)
	if err != nil {
		return nil, err
	}
	if err := f.Prepare(); err != nil {
		return nil, err
	}
	page := &store.EntryPage{Items: []*store.EntryRecord{}}
	err = s.db.View(func(tx *bolt.Tx) error {
		idx, eb, choices, total, err := pageDims(tx, &f, page)
		if err != nil {
			return err
		}
		var use []store.DimChoice
		for _, ch := range choices {
			if ch.Set {
				use = append(use, ch)
			}
		}
		// An age's index range is a dimension like the others (and the total
		// at most its size) when it is selective: at most a quarter of what
		// the other filters leave (the counters' total). A wider one would
		// cost more to read and sort than the entries it rules out cost to
		// decode, so the age stays a check on the walk.
		ageLimit := min(int64(ageSetCap), total/4)
		var ages []*valueCursor
		for _, a := range []*valueCursor{ageDim(idx, &f, after, int(ageLimit)), failedByDim(idx, &f, choices[0].Values, after, int(ageLimit))} {
			if a == nil {
				continue
			}
			ages = append(ages, a)
			if len(use) == 0 && len(ages) == 1 && !f.HasTopic() && len(f.Labels) == 0 && f.Q == "" &&
				(f.FirstSeenBefore.IsZero() || f.LastFailedBy.IsZero()) {
				page.Total, page.TotalExact = int64(len(a.mem)), true
			} else {
				page.Total = min(page.Total, int64(len(a.mem)))
			}
		}
		if len(use) == 0 && len(ages) == 0 {
			use = choices[:1] // every state: the whole store, in ref order
		}
		var dims []dimCursor
		for _, a := range ages {
			dims = append(dims, dimCursor{a})
		}
		for _, ch := range use {
			var d dimCursor
			for _, v := range ch.Values {
				h := &valueCursor{c: idx.Cursor(), prefix: store.DimPrefix(ch.Dim, v)}
				h.seek(after, after != nil)
				d = append(d, h)
			}
			dims = append(dims, d)
		}
		var last []byte
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			// The candidate is the largest of the dimensions' smallest refs;
			// every dimension seeks to it until all agree.
			var cand []byte
			for _, d := range dims {
				m, _ := d.min()
				if m == nil {
					return nil
				}
				if cand == nil || bytes.Compare(m, cand) > 0 {
					cand = m
				}
			}
			cand = bytes.Clone(cand)
			agree := true
			var at *valueCursor
			for _, d := range dims {
				d.seek(cand)
				m, h := d.min()
				if m == nil {
					return nil
				}
				if !bytes.Equal(m, cand) {
					agree = false
					break
				}
				if at == nil {
					at = h
				}
			}
			if !agree {
				continue
			}
			ek := cand
			if v := at.val(); len(v) > 0 {
				ek = v
			}
			added, full, err := take(page, eb, ek, &f, limit)
			if err != nil {
				return err
			}
			if full {
				page.Next = store.EncodeCursor(last)
				return nil
			}
			if added {
				last = cand
			}
			// Past the candidate in every dimension.
			for _, d := range dims {
				for _, h := range d {
					if r := h.ref(); r != nil && bytes.Equal(r, cand) {
						h.next()
					}
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// EntryAudit calls fn, oldest first, with the audit records about one
// entry: those naming its ref, and those naming only its idempotency key
// (key may be ""). It reads the entry's own index range, not the chain.
func (s *Bolt) EntryAudit(ctx context.Context, ref, key string, fn func(seq uint64, rec audit.Sealed, decodeErr error) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		if !indexed(tx) {
			return store.ErrNotIndexed
		}
		idx, ab := tx.Bucket(bucketIdx), tx.Bucket(bucketAudit)
		var seqs []uint64
		collect := func(prefix []byte) {
			c := idx.Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				if len(k) == len(prefix)+8 {
					seqs = append(seqs, binary.BigEndian.Uint64(k[len(prefix):]))
				}
			}
		}
		collect(auditIndexKey(&audit.Record{EntryRef: ref}))
		if key != "" {
			collect(auditIndexKey(&audit.Record{Key: key}))
		}
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		return eachAuditSeq(ctx, ab, seqs, fn)
	})
}

// RefsByID returns the refs of the entries whose source id is id (a
// bare id the user typed), from the id index.
func (s *Bolt) RefsByID(ctx context.Context, id string) ([]string, error) {
	var refs []string
	err := s.db.View(func(tx *bolt.Tx) error {
		if !indexed(tx) {
			return store.ErrNotIndexed
		}
		idx, eb := tx.Bucket(bucketIdx), tx.Bucket(bucketEntries)
		prefix := store.DimPrefix(store.DimID, id)
		c := idx.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			ek := k[len(prefix):]
			if len(v) > 0 {
				ek = v
			}
			var se store.StoredEntry
			if raw := eb.Get(ek); raw != nil && store.DecodeValue(raw, &se) == nil && se.Entry.ID == id {
				refs = append(refs, se.Entry.Ref())
			}
		}
		return ctx.Err()
	})
	return refs, err
}

// take adds the stored entry ek to page when f matches it (added). A
// match found when the page already holds limit items is not added: full
// says the page is complete, and the caller sets its cursor. No entry at
// ek (an index row left by an entry rewritten meanwhile) adds nothing.
func take(page *store.EntryPage, eb *bolt.Bucket, ek []byte, f *store.EntryFilter, limit int) (added, full bool, err error) {
	v := eb.Get(ek)
	if v == nil {
		return false, false, nil
	}
	var se store.StoredEntry
	if err := store.DecodeValue(v, &se); err != nil {
		return false, false, fmt.Errorf("decode entry %q: %w", ek, err)
	}
	r := se.EntryRecord
	if !f.Match(&r) {
		return false, false, nil
	}
	if len(page.Items) == limit {
		return false, true, nil
	}
	page.Items = append(page.Items, &r)
	return true, false, nil
}
