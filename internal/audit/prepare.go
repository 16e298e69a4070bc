package audit

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// Prepared is a record's body encoded before its place in the chain is
// known: everything but its seq and time, which only the store's single
// writer knows, and whether the store holds its policy snapshot, which
// the store finds out as it appends. Encoding the body is most of
// sealing; done ahead, outside the write lock, it leaves the writer the
// link alone (issue 33: the audit records of a replay were encoded inside
// bbolt's write transaction, where every microsecond is serial).
//
// A record carries its Prepared (Prepare); Seal uses it only while the
// record still holds what it was encoded from (all fields but Seq, Time
// and SnapshotKept compared, Decision and Input by identity), and
// encodes the record as it is otherwise. What Decision and Input point to
// must not change once the record is prepared.
type Prepared struct {
	from Record // as encoded, Seq and Time zero
	rest []byte // the body after its time: `,"actor":...}`
	// kept is where `,"snapshot_kept":true` goes in rest when the store
	// sets SnapshotKept on a record prepared without it (-1: nowhere).
	kept int
}

// bodyHead is how json.Marshal starts a Record's body: seq, then time.
const bodyHead = `{"seq":0,"time":"0001-01-01T00:00:00Z"`

const keptField = `,"snapshot_kept":true`

// Prepare encodes r ahead of its append and attaches the encoding to it;
// r itself is not changed. A record that cannot be encoded gets none
// (Seal reports why when it is appended).
func Prepare(r *Record) {
	r.prep = nil
	from := *r
	from.Seq, from.Time = 0, time.Time{}
	from.Detail = bytes.Clone(r.Detail) // the caller's bytes may change
	bp := hashBuffers.Get().(*[]byte)   // scratch: the body kept is a copy at its size
	body, ok := appendRecordJSON((*bp)[:0], &from)
	if *bp = body; ok {
		body = bytes.Clone(body)
	}
	if cap(*bp) <= 1<<20 {
		hashBuffers.Put(bp)
	}
	if !ok {
		var err error
		if body, err = json.Marshal(&from); err != nil {
			return
		}
	}
	if !bytes.HasPrefix(body, []byte(bodyHead)) {
		return
	}
	p := &Prepared{from: from, rest: body[len(bodyHead):], kept: -1}
	if r.PolicySnapshot != "" && !r.SnapshotKept {
		if p.kept = keptAt(&from, body); p.kept >= 0 {
			p.kept -= len(bodyHead)
		}
	}
	r.prep = p
}

// keptAt is where SnapshotKept's field goes in body, r's encoding
// without it: right after the policy snapshot, before the fields that
// follow it in Record (TestPreparedComparesEveryField holds the order).
// The fields around it are written here as json.Marshal writes them and
// must be what body holds there; -1 when they are not, or when a string
// would need escaping (the record is then encoded again if it must say
// the snapshot was kept).
func keptAt(r *Record, body []byte) int {
	if !plainString(r.PolicySnapshot) {
		return -1
	}
	suffix := make([]byte, 0, 96+len(r.Detail))
	for _, f := range [...]struct{ name, v string }{
		{"ledger_before", r.LedgerBefore}, {"ledger_after", r.LedgerAfter}, {"outcome", r.Outcome}} {
		if f.v == "" {
			continue
		}
		if !plainString(f.v) {
			return -1
		}
		suffix = append(suffix, `,"`+f.name+`":"`...)
		suffix = append(suffix, f.v...)
		suffix = append(suffix, '"')
	}
	if len(r.Detail) > 0 {
		var compact bytes.Buffer
		if err := json.Compact(&compact, r.Detail); err != nil {
			return -1
		}
		suffix = append(suffix, `,"detail":`...)
		suffix = append(suffix, compact.Bytes()...)
	}
	suffix = append(suffix, '}')
	if !bytes.HasSuffix(body, suffix) {
		return -1
	}
	at := len(body) - len(suffix)
	if !bytes.HasSuffix(body[:at], []byte(`"policy_snapshot":"`+r.PolicySnapshot+`"`)) {
		return -1
	}
	return at
}

// plainString reports whether json.Marshal writes s as it is between
// quotes (printable ASCII without quote, backslash or HTML characters).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// preparedBody returns r's encoding from its Prepared, or nil when r no
// longer holds what was encoded.
func (r *Record) preparedBody() ([]byte, error) {
	p := r.prep
	if p == nil || !sameButPlace(&p.from, r) {
		return nil, nil
	}
	insert := r.SnapshotKept && !p.from.SnapshotKept
	if (!r.SnapshotKept && p.from.SnapshotKept) || (insert && p.kept < 0) {
		return nil, nil
	}
	t, err := r.Time.MarshalJSON()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(`{"seq":,"time":`)+20+len(t)+len(p.rest)+len(keptField))
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"time":`...)
	b = append(b, t...)
	if !insert {
		return append(b, p.rest...), nil
	}
	b = append(b, p.rest[:p.kept]...)
	b = append(b, keptField...)
	return append(b, p.rest[p.kept:]...), nil
}

// sameButPlace reports whether r holds what p was encoded from, its place
// in the chain (Seq, Time) and SnapshotKept aside. Every field of Record
// is named here (TestPreparedComparesEveryField holds the list to the
// type).
func sameButPlace(p, r *Record) bool {
	return p.Actor == r.Actor && p.Kind == r.Kind && p.EntryRef == r.EntryRef && p.EntryID == r.EntryID &&
		p.Source == r.Source && p.Key == r.Key && p.Decision == r.Decision && p.Input == r.Input &&
		p.Action == r.Action && p.Reason == r.Reason && p.PolicySnapshot == r.PolicySnapshot &&
		p.LedgerBefore == r.LedgerBefore && p.LedgerAfter == r.LedgerAfter &&
		p.Outcome == r.Outcome && bytes.Equal(p.Detail, r.Detail)
}
