package store

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
)

// The index keys both backends build: bbolt's index buckets hold them
// (bolt/bolt_index.go, bolt/bolt_views.go), and PostgreSQL plans its
// pages and orders its lists by the same dimensions and keys, so that the
// two list the same entries in the same order.

// Dimensions of the entry index.
const (
	DimState  = 's'
	DimClass  = 'c'
	DimAction = 'a'
	DimSource = 'o'
	DimTopic  = 't'
	DimOldest = 'f'
	DimID     = 'i' // the source's id, for a bare-id lookup
	// Audit records by entry: 'r' lp(IKey(ref)) seq, and 'k' lp(key) seq
	// for records that name only a key.
	DimAuditRef = 'r'
	DimAuditKey = 'k'
	// Open approval requests, oldest first: 'q' + 8-byte requested-at + IKey(id).
	DimPendingApproval = 'q'
)

// maxIndexValue bounds an indexed value; longer ones (a pathological
// topic) are indexed under their hash so no key passes bbolt's limit.
const maxIndexValue = 1024

// ValKey is an indexed value as its keys hold it: itself, or its hash when
// longer than maxIndexValue.
func ValKey(v string) string {
	if len(v) <= maxIndexValue {
		return v
	}
	return HashKey(hashedKeyPrefix, []byte(v))
}

// IKey is the sort key of a ref in the indexes: its bbolt key, hashed
// when too long to sit beside an indexed value.
func IKey(ref string) []byte {
	k := DBKey(ref)
	if len(k) <= 2048 {
		return k
	}
	return []byte(HashKey(hashedKeyPrefix, k))
}

// AppendLP appends s to b length-prefixed (a uvarint length, then s).
func AppendLP(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// DimPrefix is the index prefix of value v of dimension dim.
func DimPrefix(dim byte, v string) []byte { return AppendLP([]byte{dim}, ValKey(v)) }

// AuditCounts says what an audit record adds to the decision counters
// (the same rule as the replayctl_replays_denied_total metric): a skip is
// not a denied replay, nothing was left to replay.
func AuditCounts(r *audit.Record) (decision, denied bool, outcome string) {
	switch r.Kind {
	case audit.KindDecision:
		decision, denied = r.ReplayProposal()
		return decision, denied, ""
	case audit.KindOutcome:
		return false, false, r.Outcome
	}
	return false, false, ""
}

// EncodeCursor and DecodeCursor keep a cursor printable (API, CLI).
func EncodeCursor(ik []byte) string { return base64.RawURLEncoding.EncodeToString(ik) }

func DecodeCursor(c string) ([]byte, error) {
	if c == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrBadCursor, c, err)
	}
	return b, nil
}

// DimChoice is a set of values of one dimension, and how many entries
// they hold.
type DimChoice struct {
	Dim    byte
	Values []string
	N      int64
	Set    bool
}

// ResolveDims maps the filter onto the indexed dimensions, case-insensitively
// against the values present.
func ResolveDims(f *EntryFilter, cells []Cell, topics map[string]int64) (choices []DimChoice, total int64, exact bool) {
	type dim struct {
		b    byte
		want []string
		get  func(Cell) string
	}
	dims := []dim{
		{DimState, f.States, func(c Cell) string { return c.State }},
		{DimClass, f.Classes, func(c Cell) string { return c.Class }},
		{DimAction, f.Actions, func(c Cell) string { return c.Action }},
		{DimSource, f.Sources, func(c Cell) string { return c.Source }},
	}
	match := func(want []string, v string) bool {
		for _, w := range want {
			if strings.EqualFold(w, v) {
				return true
			}
		}
		return len(want) == 0
	}
	for _, d := range dims {
		ch := DimChoice{Dim: d.b, Set: len(d.want) > 0}
		seen := map[string]bool{}
		for _, c := range cells {
			v := d.get(c)
			if match(d.want, v) {
				ch.N += c.N
				if !seen[v] {
					seen[v] = true
					ch.Values = append(ch.Values, v)
				}
			}
		}
		choices = append(choices, ch)
	}
	for _, c := range cells {
		if match(f.States, c.State) && match(f.Classes, c.Class) && match(f.Actions, c.Action) && match(f.Sources, c.Source) {
			total += c.N
		}
	}
	exact = !f.residual()
	if f.HasTopic() {
		ch := DimChoice{Dim: DimTopic, Set: true}
		for t, n := range topics {
			if f.TopicMatch(t) {
				ch.Values = append(ch.Values, t)
				ch.N += n
			}
		}
		if !choices[0].Set && !choices[1].Set && !choices[2].Set && !choices[3].Set {
			total = ch.N
		} else {
			exact = false
			total = min(total, ch.N)
		}
		choices = append(choices, ch)
	}
	return choices, total, exact
}

// hashedKeyPrefix marks a bbolt key that is the hash of a longer one.
const hashedKeyPrefix = "\x00sha256:"

// DBKey is the bbolt key for an idempotency key, entry ref or approval id.
// bbolt refuses keys over bolt.MaxKeySize (32 KiB), and a DLQ entry may
// carry a key or id that long (issue 14: one such entry stopped every
// run); those are stored under their SHA-256, the original kept in the
// record. Shorter keys stay as they are, so existing files read the same;
// a raw key that looks like a hashed one is hashed too, so none collide.
func DBKey(s string) []byte {
	if len(s) <= bolt.MaxKeySize && !strings.HasPrefix(s, hashedKeyPrefix) {
		return []byte(s)
	}
	return []byte(HashKey(hashedKeyPrefix, []byte(s)))
}

// DimApprovalState indexes approval requests by state, then requested-at.
const DimApprovalState = 'P'

// OrderKey is t as a key that sorts by time; the zero time sorts first.
func OrderKey(t time.Time) []byte {
	if t.IsZero() {
		return make([]byte, 8)
	}
	return TimeKey(t)
}

// AppendOrderKey appends OrderKey(t) to dst.
func AppendOrderKey(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	return binary.BigEndian.AppendUint64(dst, uint64(t.UnixNano())^(1<<63)) // TimeKey's bytes
}

// ApprovalStateKey orders approval requests by state, requested-at and
// id: bbolt's index key, and PostgreSQL's sort of the same list.
func ApprovalStateKey(a *Approval) []byte {
	return append(append(DimPrefix(DimApprovalState, a.State), OrderKey(a.RequestedAt)...), IKey(a.ID)...)
}

// TimeKey is t as 8 bytes that sort by time.
func TimeKey(t time.Time) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(t.UnixNano())^(1<<63))
	return k[:]
}
