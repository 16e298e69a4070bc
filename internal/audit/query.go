package audit

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Reader reads a stored chain in order.
type Reader interface {
	// AuditRange calls fn for every stored record from seq `from`, in key
	// order, as stored; decodeErr is set when the stored value is not a
	// sealed record.
	AuditRange(ctx context.Context, from uint64, fn func(keySeq uint64, rec Sealed, decodeErr error) error) error
	// AuditHead is the head the store recorded, with its MAC when signed.
	AuditHead(ctx context.Context) (seq uint64, hash string, err error)
	AuditHeadMAC(ctx context.Context) (string, error)
}

// Chain is everything verification reads of a store: the records and
// the head (Reader), a pruned chain's base, the unsealed tail and its
// writers' signatures, the signed head read at once, the snapshots the
// records name and the ledger beside the chain. Both stores implement all
// of it (store.Backend); what a store does not have, it answers truly (a
// bbolt chain has no unsealed tail: 0).
type Chain interface {
	Reader
	BaseReader
	TailReader
	TailChecker
	SignedHeadReader
	BlobChecker
	LedgerReader
}

// TailReader is a store whose writers append records unchained and one
// sealer chains them afterwards (PostgreSQL, so that many writers never
// queue on one head): Verify covers the chain up to the sealed head and
// reports the records after it.
type TailReader interface {
	AuditUnsealed(ctx context.Context) (int, error)
}

// TailChecker is a TailReader whose writers sign each record they append
// (PostgreSQL with a key): AuditTailForged returns the first record after
// the sealed head not signed with key (0: none), which the sealer refuses
// to chain.
type TailChecker interface {
	AuditTailForged(ctx context.Context, key []byte) (uint64, error)
}

// LedgerReader is a store that keeps an idempotency ledger beside the
// chain. A full verification compares the two: a key the chain says
// succeeded must still be succeeded in the ledger, or the next run would
// send it again (flipping succeeded back to decided passed verify, and the
// next reconcile re-sent all 30 keys: issue 29).
type LedgerReader interface {
	LedgerStates(ctx context.Context, fn func(key, state string) error) error
}

// StateSucceeded is the ledger state of a key whose replay succeeded
// (idempotency.Succeeded; terminal: the chain's word for it stands).
const StateSucceeded = "succeeded"

// ErrNotFound: no record with that id.
var ErrNotFound = errors.New("no such audit record")

// ErrCheckpointSignature: a checkpoint's MAC does not match under the key.
var ErrCheckpointSignature = errors.New("checkpoint is not signed with this key")

// VerifyResult is what walking the chain found.
type VerifyResult struct {
	Records int    `json:"records"`
	Head    string `json:"head"`
	Break   *Break `json:"break,omitempty"`
	// Signed is true when a key was given and the head's MAC matched.
	Signed bool `json:"signed"`
	// Checkpoint is true when a checkpoint was given and the chain holds it.
	Checkpoint bool `json:"checkpoint,omitempty"`
	// Unsealed counts records written after the sealed head (TailReader).
	Unsealed int `json:"unsealed,omitempty"`
	// Unchecked names each check that could not be made and what it
	// would have caught, so that "ok" is never read as more than it is.
	Unchecked []string `json:"unchecked,omitempty"`
	// MissingSnapshots counts the records naming a policy snapshot deleted
	// from the store (a break at the first of them).
	MissingSnapshots int `json:"missing_snapshots,omitempty"`
	// From is the first record this verification walked: above 1, the
	// records before it were verified earlier (Incremental) and not again,
	// or were pruned (Pruned).
	From uint64 `json:"verified_from,omitempty"`
	// Pruned is the base of a pruned chain: the records up to it are in an
	// archive (`audit verify --archive` verifies them with the live chain).
	Pruned *Checkpoint `json:"pruned_base,omitempty"`
}

// What a verification without a key or without a checkpoint cannot see.
const (
	UncheckedSignature  = "head signature: no audit key configured, so a chain rewritten consistently by someone able to write the store is not detected (set REPLAYCTL_AUDIT_KEY or --audit-key-file)"
	UncheckedCheckpoint = "rollback: no checkpoint given, so a store rolled back to an older head with that head's signature is not detected (audit verify --checkpoint F)"
)

// VerifyOptions are what Verify checks beyond the chain itself.
type VerifyOptions struct {
	// Key checks the head's signature.
	Key []byte
	// Checkpoint, exported earlier by NewCheckpoint and kept elsewhere,
	// must still be a prefix of the chain.
	Checkpoint *Checkpoint
}

// OK reports an intact chain.
func (v *VerifyResult) OK() bool { return v.Break == nil }

// HeadMAC signs a chain head with key.
func HeadMAC(key []byte, seq uint64, hash string) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%d\n%s", seq, hash)
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// Verify walks the whole chain and reports the first broken link. With a
// key it also checks the signed head, so a person who can write the
// database but lacks the key cannot rewrite history consistently.
func Verify(ctx context.Context, r Chain, key []byte) (*VerifyResult, error) {
	return VerifyWith(ctx, r, VerifyOptions{Key: key})
}

// VerifyWith is Verify with a checkpoint as well.
func VerifyWith(ctx context.Context, r Chain, o VerifyOptions) (*VerifyResult, error) {
	pre := &VerifyResult{}
	v, from, base, err := startAt(ctx, r, o.Key, pre)
	if err != nil {
		return nil, err
	}
	if pre.Break != nil {
		pre.Records, pre.Head, pre.From = int(base.Seq), base.Head, from
		return pre, nil
	}
	res, err := verifyFrom(ctx, r, o, v, from)
	if res != nil {
		res.Unchecked = append(pre.Unchecked, res.Unchecked...)
		res.Pruned = base
	}
	return res, err
}

// verifyFrom walks the chain from record `from`, v holding the state of
// the records before it.
func verifyFrom(ctx context.Context, r Chain, o VerifyOptions, v *Verifier, from uint64) (*VerifyResult, error) {
	key, cp := o.Key, o.Checkpoint
	if cp != nil && len(key) > 0 && cp.MAC != "" && !hmac.Equal([]byte(cp.MAC), []byte(HeadMAC(key, cp.Seq, cp.Head))) {
		return nil, fmt.Errorf("checkpoint (record %d): %w: it was altered or belongs to another store", cp.Seq, ErrCheckpointSignature)
	}
	res := &VerifyResult{From: from}
	atCheckpoint := ""
	// The chain covers each snapshot's hash; the store holds its text once.
	v.blobs = func(id string) error { return r.CheckSnapshot(ctx, id) }
	if cp != nil && cp.Seq > 0 && cp.Seq < from {
		// The checkpoint's record was pruned: its base (or the record
		// itself, in an archive) is what holds it.
		if cp.Seq == from-1 {
			atCheckpoint = v.Head()
		} else {
			res.Unchecked = append(res.Unchecked, fmt.Sprintf("checkpoint: its record %d was pruned into an archive; verify it with --archive", cp.Seq))
			cp = nil
		}
	}
	lr, withLedger := LedgerReader(r), from == 1
	if withLedger {
		v.succeeded = map[string]uint64{}
	}
	walk := func(from uint64) error {
		err := r.AuditRange(ctx, from, func(k uint64, s Sealed, derr error) error {
			if derr != nil {
				res.Break = &Break{Seq: k, Reason: "undecodable record: " + derr.Error()}
				return errStop
			}
			if b := v.Next(k, s); b != nil {
				res.Break = b
				return errStop
			}
			if cp != nil && k == cp.Seq {
				atCheckpoint = v.Head()
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		return nil
	}
	if err := walk(from); err != nil {
		return nil, err
	}
	var seq uint64
	var head, mac string
	for try := 0; ; try++ {
		if res.Break != nil {
			res.Records, res.Head = v.Count(), v.Head()
			return res, nil
		}
		var err error
		if seq, head, mac, err = readHead(ctx, r); err != nil {
			return nil, err
		}
		// A store that seals while we read (PostgreSQL's sealer) may have
		// moved its head on since the walk: walk on to it, a few times.
		if seq <= uint64(v.Count()) || try == 3 {
			break
		}
		if err := walk(uint64(v.Count()) + 1); err != nil {
			return nil, err
		}
	}
	res.Records, res.Head = v.Count(), v.Head()
	if seq != uint64(v.Count()) || head != v.Head() {
		res.Break = &Break{Seq: seq, Reason: fmt.Sprintf("recorded head (record %d) does not match the chain's last record (%d): records were removed from the end", seq, v.Count())}
		return res, nil
	}
	if res.MissingSnapshots = v.Missing; v.Missing > 0 {
		res.Break = v.MissingBreak()
		return res, nil
	}
	if withLedger {
		b, err := ledgerContradiction(ctx, lr, v.succeeded)
		if err != nil {
			return nil, err
		}
		if b != nil {
			res.Break = b
			return res, nil
		}
	}
	switch {
	case cp == nil && o.Checkpoint != nil:
	case cp == nil:
		res.Unchecked = append(res.Unchecked, UncheckedCheckpoint)
	case uint64(v.Count()) < cp.Seq:
		res.Break = &Break{Seq: uint64(v.Count()), Reason: fmt.Sprintf("the chain has %d record(s), fewer than the checkpoint's %d: it was rolled back or truncated", v.Count(), cp.Seq)}
		return res, nil
	case cp.Seq > 0 && atCheckpoint != cp.Head:
		res.Break = &Break{Seq: cp.Seq, Reason: fmt.Sprintf("record %d hashes to %s, not the checkpoint's %s: the chain diverges from the checkpoint", cp.Seq, atCheckpoint, cp.Head)}
		return res, nil
	default:
		res.Checkpoint = true
	}
	n, err := r.AuditUnsealed(ctx)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		res.Unsealed = n
		res.Unchecked = append(res.Unchecked, fmt.Sprintf("unsealed tail: %d record(s) written after the sealed head are not chained yet, so they are not verified (the store's sealer chains them within a second)", n))
	}
	if len(key) == 0 {
		res.Unchecked = append(res.Unchecked, UncheckedSignature)
	}
	if len(key) > 0 {
		seq, err := r.AuditTailForged(ctx, key)
		if err != nil {
			return nil, err
		}
		if seq > 0 {
			res.Break = &Break{Seq: seq, Reason: "record after the sealed head is not signed with the key: it was inserted or changed outside replayctl, and the sealer refuses to chain it"}
			return res, nil
		}
	}
	if len(key) > 0 {
		if !hmac.Equal([]byte(mac), []byte(HeadMAC(key, seq, head))) {
			res.Break = &Break{Seq: seq, Reason: "head signature does not match: the chain was rewritten without the key (or the key is wrong)"}
			return res, nil
		}
		res.Signed = true
	}
	return res, nil
}

var errStop = errors.New("stop")

// ledgerContradiction returns the earliest record saying a key succeeded
// whose ledger record now says otherwise (nil when none does). A key the
// ledger no longer holds is not counted: the store may have archived it.
func ledgerContradiction(ctx context.Context, lr LedgerReader, succeeded map[string]uint64) (*Break, error) {
	if len(succeeded) == 0 {
		return nil, nil
	}
	var first *Break
	err := lr.LedgerStates(ctx, func(key, state string) error {
		seq, ok := succeeded[key]
		if !ok || state == StateSucceeded || first != nil && first.Seq <= seq {
			return nil
		}
		first = &Break{Seq: seq, Reason: fmt.Sprintf("the ledger says key %q is %q, but this record says its replay succeeded: the ledger was edited (the runner refuses to dispatch the key until a person restores the ledger)", key, state)}
		return nil
	})
	return first, err
}

// Incremental keeps the verified head between verifications, so each one
// walks only the records appended since: a server that verifies on every
// page view no longer walks the whole chain each time. The record at the
// verified head is re-read and re-hashed first; if it changed (or the
// chain was cut below it) the walk starts again from the first record.
// A change below the verified head that leaves that record intact is only
// seen by a full walk (Verify, `audit verify`, a checkpoint), which the
// result says with From > 1. The zero value is ready to use.
type Incremental struct {
	mu   sync.Mutex
	seq  uint64
	head string
	// most is the most records ever verified intact: a stored head below
	// it is a rollback even when the shorter chain is consistent (and,
	// without a key, re-signed), which a walk alone cannot see.
	most uint64
}

// Verify verifies the records appended since the last verification.
func (iv *Incremental) Verify(ctx context.Context, r Chain, key []byte) (*VerifyResult, error) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if iv.most > 0 {
		seq, head, err := r.AuditHead(ctx)
		if err != nil {
			return nil, err
		}
		if seq < iv.most {
			return &VerifyResult{Records: int(seq), Head: head, From: seq + 1, Break: &Break{Seq: seq,
				Reason: fmt.Sprintf("the store's head is record %d, but %d records were verified earlier: the chain was rolled back or truncated", seq, iv.most)}}, nil
		}
	}
	pre := &VerifyResult{}
	v, from, base, err := startAt(ctx, r, key, pre)
	if err != nil {
		return nil, err
	}
	if pre.Break != nil {
		iv.seq, iv.head = 0, ""
		pre.Records, pre.Head, pre.From = int(base.Seq), base.Head, from
		return pre, nil
	}
	if iv.seq >= from {
		same := false
		err := r.AuditRange(ctx, iv.seq, func(k uint64, s Sealed, derr error) error {
			same = derr == nil && k == iv.seq && s.Seq == k && s.Hash == iv.head && chainHash(s.Seq, s.Prev, s.Body) == s.Hash
			return errStop
		})
		if err != nil && !errors.Is(err, errStop) {
			return nil, err
		}
		if same {
			v, from = &Verifier{prev: iv.head, nextSeq: iv.seq + 1, n: int(iv.seq)}, iv.seq+1
		}
	}
	res, err := verifyFrom(ctx, r, VerifyOptions{Key: key}, v, from)
	if res != nil {
		res.Unchecked = append(pre.Unchecked, res.Unchecked...)
		res.Pruned = base
	}
	switch {
	case err != nil:
	case res.Break == nil:
		iv.seq, iv.head = uint64(res.Records), res.Head
		iv.most = max(iv.most, iv.seq)
	default:
		iv.seq, iv.head = 0, "" // the next one walks everything again
	}
	return res, err
}

// SignedHeadReader reads the head and its MAC together, for a store whose
// head moves while it is read.
type SignedHeadReader interface {
	AuditSignedHead(ctx context.Context) (seq uint64, hash, mac string, err error)
}

func readHead(ctx context.Context, r Chain) (uint64, string, string, error) {
	return r.AuditSignedHead(ctx)
}

// Query filters records.
type Query struct {
	Entry  string // entry ref or id
	Actor  string
	Action string // matches Action, Outcome or Kind
	Kind   string
	Since  time.Time
}

// Match reports whether rec passes q.
func (q *Query) Match(rec *Record) bool {
	if q.Entry != "" && rec.EntryRef != q.Entry && rec.EntryID != q.Entry {
		return false
	}
	if q.Actor != "" && rec.Actor != q.Actor {
		return false
	}
	if q.Kind != "" && rec.Kind != q.Kind {
		return false
	}
	if q.Action != "" && string(rec.Action) != q.Action && rec.Outcome != q.Action && rec.Kind != q.Action {
		return false
	}
	return q.Since.IsZero() || !rec.Time.Before(q.Since)
}

// Each calls fn with every readable record matching q, oldest first.
func Each(ctx context.Context, r Reader, q Query, fn func(Record) error) error {
	return EachFrom(ctx, r, 1, q, fn)
}

// EachFrom is Each from record `from` on (a page of GET /api/audit).
func EachFrom(ctx context.Context, r Reader, from uint64, q Query, fn func(Record) error) error {
	return r.AuditRange(ctx, from, func(_ uint64, s Sealed, derr error) error {
		if derr != nil {
			return nil
		}
		rec, err := s.Open()
		if err != nil || !q.Match(&rec) {
			return nil
		}
		return fn(rec)
	})
}

// Get returns one record by its id (seq).
func Get(ctx context.Context, r Reader, seq uint64) (Record, error) {
	var out *Record
	err := r.AuditRange(ctx, seq, func(k uint64, s Sealed, derr error) error {
		if k == seq && derr == nil {
			rec, err := s.Open()
			if err != nil {
				return err
			}
			out = &rec
		}
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return Record{}, err
	}
	if out == nil {
		return Record{}, fmt.Errorf("%w: %d", ErrNotFound, seq)
	}
	return *out, nil
}

// Sentence tells one record as a line of an entry's story.
func Sentence(rec *Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  #%d  %s ", rec.Time.Format(time.RFC3339), rec.Seq, rec.Actor)
	switch rec.Kind {
	case KindDecision:
		d := rec.Decision
		if d != nil {
			fmt.Fprintf(&b, "decided %s: class %s", rec.Action, d.Class)
			if d.Unrecognised {
				b.WriteString(" (unrecognised)")
			}
			fmt.Fprintf(&b, ", rule %s proposed %s", d.Rule, d.ProposedAction)
			if d.PolicyAction != "" {
				fmt.Fprintf(&b, ", policy said %s", d.PolicyAction)
			}
			if d.PolicyError != "" {
				fmt.Fprintf(&b, ", policy failed (%s)", d.PolicyError)
			}
			fmt.Fprintf(&b, "; snapshot %s", short(rec.PolicySnapshot))
			if len(d.Reasons) > 0 {
				fmt.Fprintf(&b, "\n      because: %s", strings.Join(d.Reasons, "; "))
			}
		} else {
			fmt.Fprintf(&b, "decided %s", rec.Action)
		}
	case KindDispatch:
		fmt.Fprintf(&b, "dispatched (ledger %s -> %s): %s", rec.LedgerBefore, rec.LedgerAfter, rec.Reason)
	case KindOutcome:
		fmt.Fprintf(&b, "replay %s (ledger -> %s): %s", rec.Outcome, rec.LedgerAfter, rec.Reason)
	case KindRecovery:
		fmt.Fprintf(&b, "found the dispatch interrupted: outcome unknown")
	case KindProbe:
		fmt.Fprintf(&b, "compensating read: %s (%s)", rec.Outcome, rec.Reason)
	case KindApproval:
		fmt.Fprintf(&b, "approval %s: %s", rec.Outcome, rec.Reason)
	case KindResolve:
		fmt.Fprintf(&b, "resolved without replay: %s", rec.Reason)
	case KindRelease:
		fmt.Fprintf(&b, "released from quarantine: %s", rec.Reason)
	case KindWriteBack:
		fmt.Fprintf(&b, "source write-back %s: %s", rec.Outcome, rec.Reason)
	default:
		fmt.Fprintf(&b, "%s %s %s", rec.Kind, rec.Outcome, rec.Reason)
	}
	return b.String()
}

func short(s string) string {
	if len(s) > 19 {
		return s[:19]
	}
	return s
}

// Checkpoint is a chain head exported to somewhere the store's writers
// cannot reach. A head's own signature cannot show a rollback (the older
// head's signature was valid too); a later verify against a kept checkpoint
// can: the chain must still hold record Seq with hash Head.
type Checkpoint struct {
	Seq  uint64    `json:"seq"`
	Head string    `json:"head"`
	MAC  string    `json:"mac,omitempty"` // HeadMAC(key, Seq, Head) when a key was given
	Time time.Time `json:"time"`
}

// NewCheckpoint verifies the chain and returns its head as a checkpoint,
// signed when key is set. A broken chain gives no checkpoint.
func NewCheckpoint(ctx context.Context, r Chain, key []byte, now time.Time) (*Checkpoint, error) {
	res, err := Verify(ctx, r, key)
	if err != nil {
		return nil, err
	}
	if !res.OK() {
		return nil, fmt.Errorf("no checkpoint of a broken chain: %w", res.Break)
	}
	cp := &Checkpoint{Seq: uint64(res.Records), Head: res.Head, Time: now.UTC()}
	if len(key) > 0 {
		cp.MAC = HeadMAC(key, cp.Seq, cp.Head)
	}
	return cp, nil
}

// Query is the checkpoint as URL parameters, for GET /api/audit/verify.
func (cp *Checkpoint) Query() url.Values {
	return url.Values{"checkpoint_seq": {strconv.FormatUint(cp.Seq, 10)}, "checkpoint_head": {cp.Head},
		"checkpoint_mac": {cp.MAC}, "checkpoint_time": {cp.Time.UTC().Format(time.RFC3339Nano)}}
}

// CheckpointFromQuery reads what Query wrote; nil when q has none.
func CheckpointFromQuery(q url.Values) (*Checkpoint, error) {
	if !q.Has("checkpoint_seq") && !q.Has("checkpoint_head") {
		return nil, nil
	}
	seq, err := strconv.ParseUint(q.Get("checkpoint_seq"), 10, 64)
	if err != nil || q.Get("checkpoint_head") == "" {
		return nil, fmt.Errorf("checkpoint_seq and checkpoint_head must both be given (seq: %q)", q.Get("checkpoint_seq"))
	}
	cp := &Checkpoint{Seq: seq, Head: q.Get("checkpoint_head"), MAC: q.Get("checkpoint_mac")}
	if t := q.Get("checkpoint_time"); t != "" {
		if cp.Time, err = time.Parse(time.RFC3339Nano, t); err != nil {
			return nil, fmt.Errorf("checkpoint_time: %w", err)
		}
	}
	return cp, nil
}

// ExportErrorTrailer is the HTTP trailer GET /api/audit/export sets when
// the export stopped at a broken link (its value: the break), so a client
// that copies the body can still exit non-zero.
const ExportErrorTrailer = "X-Replayctl-Export-Error"

// Export writes every stored record with its chain hashes, one JSON object
// per line, for a SIEM. The CLI and the API share it so that `audit export`
// prints the same bytes from the file and through a server. It verifies as
// it goes: at the first broken link (or an unreadable record, a recorded
// head the chain does not end at, or with key a head not signed with it)
// it writes an error trailer line, {"error":{"seq":N,"reason":"..."}}, and
// returns the *Break, so a SIEM never takes a forged chain for an intact
// one and the command exits non-zero (issue 29: export exited 0 on a chain
// verify reported broken). Memory stays constant: one record at a time.
func Export(ctx context.Context, r Chain, w io.Writer, key []byte) error {
	v := NewVerifier()
	var brk *Break
	walk := func(from uint64) error {
		err := r.AuditRange(ctx, from, func(k uint64, sealed Sealed, derr error) error {
			if derr != nil {
				brk = &Break{Seq: k, Reason: "undecodable record: " + derr.Error()}
				return errStop
			}
			if b := v.Next(k, sealed); b != nil {
				brk = b
				return errStop
			}
			_, err := fmt.Fprintf(w, `{"seq":%d,"prev":%q,"hash":%q,"record":%s}`+"\n", sealed.Seq, sealed.Prev, sealed.Hash, sealed.Body)
			return err
		})
		if errors.Is(err, errStop) {
			return nil
		}
		return err
	}
	if err := walk(1); err != nil {
		return err
	}
	for try := 0; brk == nil; try++ {
		seq, head, mac, err := readHead(ctx, r)
		if err != nil {
			return err
		}
		if seq > uint64(v.Count()) && try < 3 {
			// A sealer moved the head on while we read: export on to it.
			if err := walk(uint64(v.Count()) + 1); err != nil {
				return err
			}
			continue
		}
		switch {
		case seq != uint64(v.Count()) || head != v.Head():
			brk = &Break{Seq: seq, Reason: fmt.Sprintf("recorded head (record %d) does not match the chain's last record (%d): records were removed from the end", seq, v.Count())}
		case len(key) > 0 && !hmac.Equal([]byte(mac), []byte(HeadMAC(key, seq, head))):
			brk = &Break{Seq: seq, Reason: "head signature does not match: the chain was rewritten without the key (or the key is wrong)"}
		}
		break
	}
	if brk == nil {
		return nil
	}
	trailer, err := json.Marshal(map[string]*Break{"error": brk})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%s\n", trailer); err != nil {
		return err
	}
	return brk
}
