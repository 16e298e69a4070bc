package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
)

var (
	bucketLedger    = []byte("ledger")
	bucketEntries   = []byte("entries")
	bucketPayloads  = []byte("payloads") // entry ref -> payload bytes, verbatim
	bucketAudit     = []byte("audit")
	bucketApprovals = []byte("approvals")
	bucketSnapshots = []byte("snapshots")
	bucketMeta      = []byte("meta")
	allBuckets      = [][]byte{bucketLedger, bucketEntries, bucketPayloads, bucketAudit, bucketApprovals, bucketSnapshots, bucketMeta,
		bucketIdx, bucketCounters, bucketSigMeta, bucketPayloadsZ, bucketLineages, bucketGroups}

	keyAuditHead = []byte("audit_head")
	keyAuditMAC  = []byte("audit_head_mac")
)

// InUseError says another process holds the database.
type InUseError struct {
	Path string
	PID  int // 0 when unknown
}

func (e *InUseError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%s is in use by pid %d (one process per file: stop it, or send the command through the server it runs: --server URL --token T)", e.Path, e.PID)
	}
	return fmt.Sprintf("%s is in use by another process (one process per file)", e.Path)
}

// Bolt is the bbolt-backed store.
type Bolt struct {
	db   *bolt.DB
	path string
	now  func() time.Time
	ro   bool
	key  []byte
	// instance names this open of the file; bbolt's file lock means no
	// other live process can own a dispatching record in it.
	instance string
	flight   inFlight
	group    groupCommit
	memo     writeMemo
	// tamper counts the appends refused on a forged head (audit_guard.go).
	tamper store.TamperCount
	// onEntryDecode, when set (tests), is called for every entry record
	// a transaction decodes: proves PutEntry reuses what Entry read.
	onEntryDecode func()
}

var _ store.Store = (*Bolt)(nil)

// Open opens (creating unless read-only) the database file. Another
// process holding it gives an *InUseError naming its pid, not a hang.
func Open(path string, o store.Options) (*Bolt, error) {
	if o.LockTimeout <= 0 {
		o.LockTimeout = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: o.LockTimeout, ReadOnly: o.ReadOnly, FreelistType: bolt.FreelistMapType})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, &InUseError{Path: path, PID: readPID(path)}
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// A batch commits when MaxBatchSize writers wait or MaxBatchDelay has
	// passed: sized to the writers (reconcile sets it to --max-parallel),
	// a batch rarely waits out the delay.
	db.MaxBatchSize = 8
	if o.MaxBatchSize > 0 {
		db.MaxBatchSize = o.MaxBatchSize
	}
	db.MaxBatchDelay = time.Millisecond
	// bbolt grows the file 16 MB at a time by default; a small store
	// would carry most of that as slack. A grow costs one ftruncate and
	// fsync, so 1 MB steps are still rare next to a run's commits.
	db.AllocSize = 1 << 20
	if o.MaxBatchDelay > 0 {
		db.MaxBatchDelay = o.MaxBatchDelay
	}
	s := &Bolt{db: db, path: path, now: o.Now, ro: o.ReadOnly, key: o.AuditKey, instance: store.NewInstanceID()}
	if !o.ReadOnly {
		if err := db.Update(func(tx *bolt.Tx) error {
			for _, b := range allBuckets {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			db.Close()
			return nil, fmt.Errorf("init %s: %w", path, err)
		}
		// A file written before the indexes existed is indexed once here.
		if err := s.ensureIndex(context.Background()); err != nil {
			db.Close()
			return nil, err
		}
		// Best effort: lets a second process name who holds the lock.
		_ = os.WriteFile(pidPath(path), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	}
	return s, nil
}

func pidPath(db string) string { return db + ".pid" }

func readPID(db string) int {
	b, err := os.ReadFile(pidPath(db))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// Path is the database file.
func (s *Bolt) Path() string { return s.path }

// Close releases the file.
func (s *Bolt) Close() error {
	if !s.ro {
		_ = os.Remove(pidPath(s.path))
	}
	return s.db.Close()
}

// Update runs fn in a batched read-write transaction (group commit, see
// groupCommit).
func (s *Bolt) Update(ctx context.Context, fn func(store.Tx) error) error {
	if s.ro {
		return store.ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.tamper.Count(s.batch(fn))
}

// runWrite runs fn in a read-write bbolt transaction, then writes what fn
// left pending (ledger records, the audit head, counter deltas).
func (s *Bolt) runWrite(btx *bolt.Tx, fn func(store.Tx) error) error {
	setFillPercent(btx)
	t := s.writeTx(btx)
	if err := fn(t); err != nil {
		return err
	}
	return t.flush()
}

// writeTx is the boltTx of a read-write bbolt transaction.
func (s *Bolt) writeTx(btx *bolt.Tx) *boltTx {
	return &boltTx{tx: btx, now: s.now, key: s.key, onDecode: s.onEntryDecode, memo: &s.memo}
}

// View runs fn in a read-only transaction.
func (s *Bolt) View(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(func(btx *bolt.Tx) error { return fn(&boltTx{tx: btx, now: s.now, onDecode: s.onEntryDecode}) })
}

type boltTx struct {
	tx  *bolt.Tx
	now func() time.Time
	key []byte
	// old remembers, per entry key, what a read-write transaction read
	// or wrote there, so that Entry then PutEntry of the same ref (every
	// replay step) decodes the record once: PutEntry needs only the old
	// record's index facets and, to skip an unchanged payload, its bytes.
	// Only Entry and PutEntry write the entries bucket through a boltTx.
	old map[string]oldEntry
	// ledger holds the ledger records a read-write transaction read or
	// moved, the moved ones (dirty) written once by flush: an intent moves
	// a key twice (none -> decided -> dispatching) and would otherwise
	// decode and encode it twice.
	ledger map[string]ledgerSlot
	// head is the audit chain head once read; Append advances it and
	// flush writes it (and its MAC) once per transaction instead of once
	// per record (a window appends two or three records per entry).
	head      *auditHead
	headDirty bool
	// cnt gathers the counter deltas of the transaction's writes, applied
	// once each by flush.
	cnt *counts
	// memo is the store's writeMemo (read-write transactions only).
	memo     *writeMemo
	onDecode func()
}

// counters returns the transaction's counter deltas (nil on a file whose
// counters bucket a read-only open cannot create).
func (t *boltTx) counters() *counts {
	if t.cnt == nil {
		b := t.bucket(bucketCounters)
		if b == nil {
			return nil
		}
		t.cnt = &counts{b: b, pending: make(map[string]int64, 16)}
	}
	return t.cnt
}

type ledgerSlot struct {
	rec   *idempotency.Record // nil: no record
	dirty bool
}

// flush writes what the transaction left pending. Only on success: an
// error rolls the whole bbolt transaction back anyway.
func (t *boltTx) flush() error {
	if t.cnt != nil {
		if err := t.cnt.apply(); err != nil {
			return fmt.Errorf("counters: %w", err)
		}
	}
	if len(t.ledger) > 0 {
		b := t.bucket(bucketLedger)
		for k, sl := range t.ledger {
			if sl.dirty {
				data, err := store.EncodeHotRecord(sl.rec)
				if err != nil {
					return fmt.Errorf("ledger %q: %w", k, err)
				}
				if err := b.Put([]byte(k), data); err != nil {
					return fmt.Errorf("ledger %q: %w", k, err)
				}
				t.memo.putLedger(k, data, sl.rec)
			}
		}
	}
	if t.headDirty {
		meta := t.bucket(bucketMeta)
		if len(t.key) > 0 {
			if err := meta.Put(keyAuditMAC, []byte(audit.HeadMAC(t.key, t.head.Seq, t.head.Hash))); err != nil {
				return err
			}
		}
		if err := putJSON(meta, keyAuditHead, *t.head); err != nil {
			return err
		}
	}
	return nil
}

// oldEntry is what PutEntry needs of the record stored under a key.
type oldEntry struct {
	facets facets
	exists bool
	// payload is a private copy of the stored payload (nil: unknown, read
	// it again), kept apart from the caller's so an in-place edit of the
	// returned record cannot pass for the stored bytes.
	payload []byte
	// rec is a private copy of the record Entry decoded, without its
	// payload, and raw the stored bytes it decoded: a second Entry of the
	// key in the transaction (a guarded write checks the entry, then
	// records it) copies rec while the key still holds raw, instead of
	// decoding it again. nil: decode.
	rec *store.EntryRecord
	raw []byte
}

// entryRecord reads and decodes the entry record stored under key.
func (t *boltTx) entryRecord(key []byte) (*store.StoredEntry, error) {
	if t.onDecode != nil {
		if b := t.bucket(bucketEntries); b != nil && b.Get(key) != nil {
			t.onDecode()
		}
	}
	return getJSON[store.StoredEntry](t.bucket(bucketEntries), key)
}

// bucket returns a bucket, or nil when a read-only file predates it.
func (t *boltTx) bucket(name []byte) *bolt.Bucket { return t.tx.Bucket(name) }

func getJSON[T any](b *bolt.Bucket, key []byte) (*T, error) {
	if b == nil {
		return nil, nil
	}
	v := b.Get(key)
	if v == nil {
		return nil, nil
	}
	var out T
	if err := store.DecodeValue(v, &out); err != nil {
		return nil, fmt.Errorf("decode record %q: %w", key, err)
	}
	return &out, nil
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	if b == nil {
		return store.ErrReadOnly
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

func (t *boltTx) Ledger(key string) (*idempotency.Record, error) {
	if !t.tx.Writable() {
		return getJSON[idempotency.Record](t.bucket(bucketLedger), store.DBKey(key))
	}
	k := string(store.DBKey(key))
	sl, ok := t.ledger[k]
	if !ok {
		b := t.bucket(bucketLedger)
		rec, known := t.memo.ledgerRecord(k, b.Get([]byte(k)))
		if !known {
			var err error
			if rec, err = getJSON[idempotency.Record](b, []byte(k)); err != nil {
				return nil, err
			}
		}
		sl = ledgerSlot{rec: rec}
		if t.ledger == nil {
			t.ledger = make(map[string]ledgerSlot, 4)
		}
		t.ledger[k] = sl
	}
	if sl.rec == nil {
		return nil, nil
	}
	cp := *sl.rec // the caller's to change
	return &cp, nil
}

func (t *boltTx) Transition(tr idempotency.Transition) (idempotency.Record, error) {
	cur, err := t.Ledger(tr.Key)
	if err != nil {
		return idempotency.Record{}, err
	}
	next, err := idempotency.Apply(cur, tr, t.now().UTC())
	if err != nil {
		return idempotency.Record{}, err
	}
	if !t.tx.Writable() {
		return idempotency.Record{}, store.ErrReadOnly
	}
	stored := next
	t.ledger[string(store.DBKey(tr.Key))] = ledgerSlot{rec: &stored, dirty: true}
	return next, nil
}

func (t *boltTx) Entry(ref string) (*store.EntryRecord, error) {
	key := store.DBKey(ref)
	if r := t.entryAgain(key); r != nil {
		return r, nil
	}
	se, err := t.entryRecord(key)
	if err != nil || se == nil {
		return nil, err
	}
	payload, err := readPayload(t.tx, key)
	if err != nil {
		return nil, err
	}
	r := store.DecodeEntry(se, payload)
	if t.tx.Writable() {
		if t.old == nil {
			t.old = make(map[string]oldEntry, 4)
		}
		// Facets now, before the caller changes r (this process's last
		// write of the record knows them); the payload copied only when
		// it is the separately stored one writePayload compares.
		f, known := t.memo.entryFacets(string(key), t.bucket(bucketEntries).Get(key))
		if !known {
			f = entryFacets(&se.EntryRecord)
		}
		o := oldEntry{facets: f, exists: true}
		if payload != nil {
			o.payload = bytes.Clone(payload)
			rec := cloneUnpaid(r)
			o.rec, o.raw = &rec, bytes.Clone(t.bucket(bucketEntries).Get(key))
		}
		t.old[string(key)] = o
	}
	return r, nil
}

// entryAgain is the record Entry decoded earlier in this read-write
// transaction, copied, while the key still holds the bytes it decoded
// (nil otherwise). Only records whose payload is stored apart are kept:
// an older file's inline payload is decoded with the record.
func (t *boltTx) entryAgain(key []byte) *store.EntryRecord {
	if !t.tx.Writable() {
		return nil
	}
	o, ok := t.old[string(key)]
	if !ok || o.rec == nil || !bytes.Equal(o.raw, t.bucket(bucketEntries).Get(key)) {
		return nil
	}
	r := cloneUnpaid(o.rec)
	r.Entry.Payload = bytes.Clone(o.payload)
	return &r
}

func (t *boltTx) PutEntry(r *store.EntryRecord) error {
	ref := store.DBKey(r.Entry.Ref())
	// The old record tells which index keys and counters to move; a
	// corrupt one is overwritten and counted as new. Entry or an earlier
	// PutEntry in this transaction already knows them.
	o, known := t.old[string(ref)]
	if !known {
		if f, ok := t.memo.entryFacets(string(ref), t.bucket(bucketEntries).Get(ref)); ok {
			o = oldEntry{facets: f, exists: true}
		} else if se, err := t.entryRecord(ref); err == nil && se != nil {
			o = oldEntry{facets: entryFacets(&se.EntryRecord), exists: true}
		}
	}
	nf := entryFacets(r)
	if err := reindexFacets(t.tx, t.counters(), o.exists, o.facets, r, nf, t.now().UTC()); err != nil {
		return err
	}
	if r.Entry.Payload != nil && (o.payload == nil || !bytes.Equal(o.payload, r.Entry.Payload)) {
		if err := writePayload(t.tx, ref, r.Entry.Payload); err != nil {
			return err
		}
	}
	eb := t.bucket(bucketEntries)
	if eb == nil {
		return store.ErrReadOnly
	}
	data, err := store.EncodeEntryHot(r)
	if err != nil {
		return err
	}
	if err := eb.Put(ref, data); err != nil {
		return err
	}
	t.memo.putFacets(string(ref), data, nf)
	if t.old == nil {
		t.old = make(map[string]oldEntry, 4)
	}
	t.old[string(ref)] = oldEntry{facets: nf, exists: true} // payload: read again if put again
	return nil
}

// boltPrepared is what bbolt works out of a PreparedEntry before the
// transaction: inside its write lock, where every microsecond is serial,
// what is left is a byte comparison, the index diff and the puts (issue
// 33: decoding, changing and encoding the outcome's entry record and its
// facets was a third of the work inside it).
type boltPrepared struct {
	base   []byte // store.EncodeEntryHot(Prev)
	data   []byte // store.EncodeEntryHot(Next)
	facets facets // entryFacets(Next)
	// fresh: Prev is nil, a new entry. Its record is known ahead but for
	// its last_decision, the seq of the decision record appended in the
	// same transaction: json is Next's record JSON (not compressed: s2's
	// 64 KB stack table would grow the caller's goroutine), with its
	// last_decision's digits at json[at:at+n] (at -1: none), and
	// PutPrepared writes Next's value there, then compresses it.
	fresh bool
	json  []byte
	at, n int
	// payload is Next's payload as stored (store.EncodePayload), nil
	// when it has none: a fresh record is stored with it.
	payload []byte
}

// placeholderSeq is what a fresh record's last_decision is encoded with
// before its seq is known: the widest a seq is written, so that the JSON
// is never shorter than it was predicted.
const placeholderSeq = ^uint64(0)

// PrepareEntry encodes prev and next as bbolt stores them, and next's
// facets. The encoding runs on one of the store's encoder goroutines
// (store.EncodeEntriesAside), not the caller's. nil when either does not
// encode: PutEntry then reports why, in the transaction.
func (s *Bolt) PrepareEntry(prev, next *store.EntryRecord) *store.PreparedEntry {
	if prev == nil && next != nil {
		return prepareFresh(next)
	}
	if prev == nil || next == nil || prev.Entry.Ref() != next.Entry.Ref() {
		return nil
	}
	base, data, err := store.EncodeEntriesAside(prev, next)
	if err != nil {
		return nil
	}
	return &store.PreparedEntry{Prev: prev, Next: next, Ahead: &boltPrepared{base: base, data: data, facets: entryFacets(next)}}
}

// prepareFresh is PrepareEntry of a new entry: next's JSON and facets,
// worked out on the caller's goroutine (the JSON appender and the facets
// need no large stack; the s2 compression, which does, stays inside).
// Its intent's transaction (issue 33: the intent's entry record, its
// encoding and its index keys were a third of the intent's work inside
// the lock) checks the key holds nothing and sets last_decision.
func prepareFresh(next *store.EntryRecord) *store.PreparedEntry {
	rec := *next
	if rec.LastDecision != 0 {
		rec.LastDecision = placeholderSeq
	}
	// Sized once for a typical record (growing it from nothing was five
	// allocations); kept until the transaction, so not pooled.
	js, at, ok := store.AppendEntryJSONAt(make([]byte, 0, 768+len(rec.Entry.Message)), &rec)
	if !ok {
		return nil
	}
	n := 0
	if at >= 0 {
		n = len(strconv.FormatUint(placeholderSeq, 10))
	}
	var payload []byte
	if next.Entry.Payload != nil {
		// s2 without a dictionary sizes its table (and stack frame) by
		// the payload's length: a typical payload's is a few KB.
		var err error
		if payload, err = store.EncodePayload(next.Entry.Payload); err != nil {
			return nil
		}
	}
	return &store.PreparedEntry{Next: next, Ahead: &boltPrepared{fresh: true, json: js, at: at, n: n, facets: entryFacets(next), payload: payload}}
}

// freshData is a fresh prepared record as stored, its last_decision p's
// (ok false: p.Next's last_decision is zero where the prediction had one,
// or the reverse).
func (bp *boltPrepared) freshData(p *store.PreparedEntry) ([]byte, bool, error) {
	if (bp.at >= 0) != (p.Next.LastDecision != 0) {
		return nil, false, nil
	}
	js := bp.json
	if bp.at >= 0 {
		// Spliced into a pooled copy, never in place: the transaction
		// may run again.
		buf := store.JSONBuffers.Get().(*bytes.Buffer)
		defer store.PutJSONBuffer(buf)
		buf.Write(js[:bp.at])
		buf.Write(strconv.AppendUint(buf.AvailableBuffer(), p.Next.LastDecision, 10))
		buf.Write(js[bp.at+bp.n:])
		js = buf.Bytes()
	}
	data, err := store.CompressHotRecord(js)
	return data, err == nil, err
}

// putFresh is PutPrepared of a new entry: where the key holds nothing, the
// record, its payload and its index keys and counters, as PutEntry writes
// them for a new record.
func (t *boltTx) putFresh(p *store.PreparedEntry, bp *boltPrepared) (bool, error) {
	eb := t.bucket(bucketEntries)
	if eb == nil {
		return false, store.ErrReadOnly
	}
	ref := store.DBKey(p.Next.Entry.Ref())
	if eb.Get(ref) != nil {
		return false, nil
	}
	data, ok, err := bp.freshData(p)
	if !ok {
		return false, err
	}
	if err := reindexFacets(t.tx, t.counters(), false, facets{}, p.Next, bp.facets, t.now().UTC()); err != nil {
		return false, err
	}
	if p.Next.Entry.Payload != nil {
		if err := writeEncodedPayload(t.tx, ref, p.Next.Entry.Payload, bp.payload); err != nil {
			return false, err
		}
	}
	if err := eb.Put(ref, data); err != nil {
		return false, err
	}
	t.memo.putFacets(string(ref), data, bp.facets)
	if t.old == nil {
		t.old = make(map[string]oldEntry, 4)
	}
	t.old[string(ref)] = oldEntry{facets: bp.facets, exists: true}
	return true, nil
}

// PutPrepared stores p.Next where the key still holds p.Prev's bytes
// (compared byte for byte: the stored record is then p.Prev, and p's
// encoding is what PutEntry would write). The payload is not written:
// the stored one is Prev's, which Next keeps. A fresh p (Prev nil) is
// stored where the key holds nothing, payload included (putFresh).
func (t *boltTx) PutPrepared(p *store.PreparedEntry) (bool, error) {
	bp, ok := p.Ahead.(*boltPrepared)
	if !ok || !t.tx.Writable() {
		return false, nil
	}
	if bp.fresh {
		return t.putFresh(p, bp)
	}
	eb := t.bucket(bucketEntries)
	if eb == nil {
		return false, store.ErrReadOnly
	}
	ref := store.DBKey(p.Next.Entry.Ref())
	stored := eb.Get(ref)
	if stored == nil || !bytes.Equal(stored, bp.base) {
		return false, nil
	}
	o, known := t.old[string(ref)]
	of := o.facets
	if !known {
		of, known = t.memo.entryFacets(string(ref), stored)
	}
	if !known {
		of = entryFacets(p.Prev)
	}
	if err := reindexFacets(t.tx, t.counters(), true, of, p.Next, bp.facets, t.now().UTC()); err != nil {
		return false, err
	}
	if err := eb.Put(ref, bp.data); err != nil {
		return false, err
	}
	t.memo.putFacets(string(ref), bp.data, bp.facets)
	if t.old == nil {
		t.old = make(map[string]oldEntry, 4)
	}
	t.old[string(ref)] = oldEntry{facets: bp.facets, exists: true}
	return true, nil
}

func (t *boltTx) Approval(id string) (*store.Approval, error) {
	return getJSON[store.Approval](t.bucket(bucketApprovals), store.DBKey(id))
}

func (t *boltTx) PutApproval(a *store.Approval) error {
	old, err := getJSON[store.Approval](t.bucket(bucketApprovals), store.DBKey(a.ID))
	if err != nil {
		old = nil // a corrupt record is overwritten
	}
	if err := reindexApproval(t.tx, old, a); err != nil {
		return err
	}
	return putRecord(t.bucket(bucketApprovals), store.DBKey(a.ID), a)
}

type auditHead struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

func (t *boltTx) Append(r *audit.Record) (audit.Sealed, error) {
	meta, b := t.bucket(bucketMeta), t.bucket(bucketAudit)
	if meta == nil || b == nil {
		return audit.Sealed{}, store.ErrReadOnly
	}
	if len(t.key) == 0 && len(meta.Get(keyAuditMAC)) > 0 {
		return audit.Sealed{}, store.ErrAuditKeyRequired
	}
	if t.head == nil {
		head := auditHead{Hash: audit.Genesis}
		if v := meta.Get(keyAuditHead); v != nil {
			if err := json.Unmarshal(v, &head); err != nil {
				return audit.Sealed{}, fmt.Errorf("decode audit head: %w", err)
			}
		}
		// The head is authenticated before it is extended: flush signs
		// the new one, so extending a forged head would launder it.
		if !store.CheckHeadMAC(t.key, head.Seq, head.Hash, string(meta.Get(keyAuditMAC))) {
			return audit.Sealed{}, (*store.TamperCount)(nil).Refuse(head.Seq, "the stored head is not signed with this key (records were removed, rewritten or re-chained since the last keyed write)")
		}
		t.head = &head
	}
	head := *t.head
	r.Seq = head.Seq + 1
	if r.PolicySnapshot != "" && !r.SnapshotKept {
		// Covered by the chain: verify holds this record to its snapshot
		// whatever the unsigned kept-from marker says (snapshot_check.go).
		if sb := t.bucket(bucketSnapshots); sb != nil && sb.Get([]byte(r.PolicySnapshot)) != nil {
			r.SnapshotKept = true
		}
	}
	if r.Time.IsZero() {
		r.Time = t.now().UTC()
	}
	sealed, err := audit.Seal(r, head.Hash)
	if err != nil {
		return audit.Sealed{}, err
	}
	data, err := encodeSealed(&sealed)
	if err != nil {
		return audit.Sealed{}, err
	}
	if err := b.Put(seqKey(r.Seq), data); err != nil {
		return audit.Sealed{}, err
	}
	if err := countAudit(t.tx, t.counters(), r); err != nil {
		return audit.Sealed{}, err
	}
	// The head (and its MAC) are written by flush, once.
	t.head, t.headDirty = &auditHead{Seq: r.Seq, Hash: sealed.Hash}, true
	return sealed, nil
}

// encodeSealed is encodeHotRecord(s) for a record audit.Seal made: s2
// against dictionary 1, like ledger and entry records (see compress.go).
// json.Marshal of a Sealed re-compacts its Body (a json.RawMessage), a scan of the whole
// record that was a twentieth of reconcile's CPU; Seal's body is already
// json.Marshal output, compact and escaped, so the same bytes are written
// directly. Hashes that would need escaping (never from Seal) take the
// general path.
func encodeSealed(s *audit.Sealed) ([]byte, error) {
	if !plainJSONString(s.Prev) || !plainJSONString(s.Hash) || len(s.Body) == 0 {
		return store.EncodeHotRecord(s)
	}
	buf := store.JSONBuffers.Get().(*bytes.Buffer)
	defer store.PutJSONBuffer(buf)
	buf.WriteString(`{"seq":`)
	buf.Write(strconv.AppendUint(buf.AvailableBuffer(), s.Seq, 10))
	buf.WriteString(`,"prev":"`)
	buf.WriteString(s.Prev)
	buf.WriteString(`","hash":"`)
	buf.WriteString(s.Hash)
	buf.WriteString(`","body":`)
	buf.Write(s.Body)
	buf.WriteByte('}')
	return store.CompressHotRecord(buf.Bytes())
}

// plainJSONString reports whether encoding/json writes s as it is between
// quotes (printable ASCII without quote, backslash or HTML characters).
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// AuditHeadMAC returns the signature of the head ("" when never signed).
func (s *Bolt) AuditHeadMAC(ctx context.Context) (string, error) {
	var mac string
	err := s.db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta != nil {
			mac = string(meta.Get(keyAuditMAC))
		}
		return nil
	})
	return mac, err
}

// AuditRange calls fn with every stored audit record from seq `from`
// (1 = the first), in order, as stored (fn sees tampering as it is).
func (s *Bolt) AuditRange(ctx context.Context, from uint64, fn func(keySeq uint64, rec audit.Sealed, decodeErr error) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(seqKey(from)); k != nil; k, v = c.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			var sealed audit.Sealed
			var derr error
			if len(k) != 8 {
				derr = fmt.Errorf("bad audit key %x", k)
			} else if err := store.DecodeValue(v, &sealed); err != nil {
				derr = err
			}
			seq := uint64(0)
			if len(k) == 8 {
				seq = binary.BigEndian.Uint64(k)
			}
			if err := fn(seq, sealed, derr); err != nil {
				return err
			}
		}
		return nil
	})
}

// AuditHead returns the chain head as the store recorded it.
func (s *Bolt) AuditHead(ctx context.Context) (seq uint64, hash string, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			hash = audit.Genesis
			return nil
		}
		head := auditHead{Hash: audit.Genesis}
		if v := meta.Get(keyAuditHead); v != nil {
			if err := json.Unmarshal(v, &head); err != nil {
				return err
			}
		}
		seq, hash = head.Seq, head.Hash
		return nil
	})
	return seq, hash, err
}

// Entries calls fn for every stored entry in ref order.
func (s *Bolt) Entries(ctx context.Context, fn func(*store.EntryRecord) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEntries)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			var se store.StoredEntry
			if err := store.DecodeValue(v, &se); err != nil {
				return fmt.Errorf("decode entry %q: %w", k, err)
			}
			payload, err := readPayload(tx, k)
			if err != nil {
				return err
			}
			return fn(store.DecodeEntry(&se, payload))
		})
	})
}

// Approvals calls fn for every approval request.
func (s *Bolt) Approvals(ctx context.Context, fn func(*store.Approval) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketApprovals)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			var a store.Approval
			if err := store.DecodeValue(v, &a); err != nil {
				return fmt.Errorf("decode approval %q: %w", k, err)
			}
			return fn(&a)
		})
	})
}

// LedgerRecords calls fn for every ledger record (recovery, reports).
func (s *Bolt) LedgerRecords(ctx context.Context, fn func(*idempotency.Record) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLedger)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			var r idempotency.Record
			if err := store.DecodeValue(v, &r); err != nil {
				return fmt.Errorf("decode ledger %q: %w", k, err)
			}
			return fn(&r)
		})
	})
}

// PutSnapshot keeps the rules and policy text of a snapshot (once).
func (s *Bolt) PutSnapshot(ctx context.Context, id string, snapshot any) error {
	if s.ro {
		return store.ErrReadOnly
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := markSnapshotsKept(tx); err != nil { // snapshot_check.go
			return err
		}
		b := tx.Bucket(bucketSnapshots)
		if b.Get([]byte(id)) != nil {
			return nil
		}
		return putRecord(b, []byte(id), snapshot)
	})
}

// Snapshot loads a stored snapshot into out.
func (s *Bolt) Snapshot(ctx context.Context, id string, out any) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSnapshots)
		if b == nil {
			return store.ErrNotFound
		}
		v := b.Get([]byte(id))
		if v == nil {
			return store.ErrNotFound
		}
		data, err := store.RecordJSON(v)
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", id, err)
		}
		return json.NewDecoder(bytes.NewReader(data)).Decode(out)
	})
}
