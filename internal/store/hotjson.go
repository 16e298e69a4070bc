package store

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
)

// The appenders below write the JSON of the records a replay rewrites
// (entry and ledger records) by hand, byte for byte what encoding/json
// writes for them: stored files, the PostgreSQL backend and every reader
// stay as they were. Issue 33: encoding/json's reflection was a tenth of
// reconcile's CPU, most of it these two records, the ledger's inside
// bbolt's write lock. Anything they are not sure to write as encoding/json
// does (a payload held inline, a time outside RFC 3339) makes them give
// up (ok false), and the caller encodes with encoding/json
// (EncodeHotRecord). FuzzHotJSONMatchesEncodingJSON holds them to
// encoding/json over random records; TestHotJSONCoversEveryField holds the
// field lists to the types.

// appendStoredEntryJSON appends se's JSON as json.Marshal writes it
// (HTML escaped); ok false when it cannot be sure to.
func appendStoredEntryJSON(dst []byte, se *StoredEntry) ([]byte, bool) {
	if len(se.PayloadBytes) > 0 || len(se.Entry.Payload) > 0 {
		return dst, false // base64 and RawMessage's compaction: encoding/json's
	}
	return appendEntryRecordJSON(dst, &se.EntryRecord)
}

// appendEntryRecordJSON appends the JSON of EncodeEntry(r): r without its
// payload.
func appendEntryRecordJSON(dst []byte, r *EntryRecord) ([]byte, bool) {
	dst = append(dst, `{"entry":`...)
	dst, ok := appendEntryJSON(dst, &r.Entry)
	if !ok {
		return dst, false
	}
	dst = append(dst, `,"status":`...)
	dst = appendJSONString(dst, r.Status)
	dst = appendOptString(dst, `,"class":`, string(r.Class))
	dst = appendOptString(dst, `,"action":`, string(r.Action))
	dst = appendOptString(dst, `,"owner":`, r.Owner)
	dst = appendOptString(dst, `,"approver_group":`, r.ApproverGroup)
	dst = appendOptString(dst, `,"reason":`, r.Reason)
	if r.LastDecision != 0 {
		dst = append(dst, `,"last_decision":`...)
		dst = strconv.AppendUint(dst, r.LastDecision, 10)
	}
	dst = appendOptString(dst, `,"evidence":`, r.Evidence)
	dst = appendOptString(dst, `,"approval_id":`, r.ApprovalID)
	dst = appendOptString(dst, `,"hold":`, r.Hold)
	dst = appendOptString(dst, `,"probe":`, r.Probe)
	dst = appendOptString(dst, `,"write_back_pending":`, r.WriteBackPending)
	if r.Settled {
		dst = append(dst, `,"settled":true`...)
	}
	dst = append(dst, `,"first_seen":`...)
	if dst, ok = appendJSONTime(dst, r.FirstSeen); !ok {
		return dst, false
	}
	dst = append(dst, `,"last_seen":`...)
	if dst, ok = appendJSONTime(dst, r.LastSeen); !ok {
		return dst, false
	}
	if !r.NextAttemptAt.IsZero() {
		dst = append(dst, `,"next_attempt_at":`...)
		if dst, ok = appendJSONTime(dst, r.NextAttemptAt); !ok {
			return dst, false
		}
	}
	if g := r.Group; g != nil {
		dst = append(dst, `,"group":{"source":`...)
		dst = appendJSONString(dst, g.Source)
		dst = append(dst, `,"topic":`...)
		dst = appendJSONString(dst, g.Topic)
		dst = append(dst, `,"class":`...)
		dst = appendJSONString(dst, g.Class)
		dst = append(dst, `,"error":`...)
		dst = appendJSONString(dst, g.Error)
		dst = append(dst, '}')
	}
	return append(dst, '}'), true
}

// appendEntryJSON appends e's JSON without its payload.
func appendEntryJSON(dst []byte, e *entry.Entry) ([]byte, bool) {
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, e.ID)
	dst = append(dst, `,"source":`...)
	dst = appendJSONString(dst, e.Source)
	dst = appendOptString(dst, `,"origin":`, e.Origin)
	dst = appendOptString(dst, `,"scope":`, e.Scope)
	dst = appendOptString(dst, `,"lineage":`, e.Lineage)
	if len(e.Ancestors) > 0 {
		dst = append(dst, `,"ancestors":[`...)
		for i, a := range e.Ancestors {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, a)
		}
		dst = append(dst, ']')
	}
	dst = appendOptString(dst, `,"topic":`, e.Topic)
	dst = appendOptString(dst, `,"reason_code":`, e.ReasonCode)
	dst = appendOptString(dst, `,"message":`, e.Message)
	dst = append(dst, `,"attempts":`...)
	dst = strconv.AppendInt(dst, int64(e.Attempts), 10)
	dst = append(dst, `,"idempotency_key":`...)
	dst = appendJSONString(dst, e.IdempotencyKey)
	if e.KeyDerived {
		dst = append(dst, `,"key_derived":true`...)
	}
	var ok bool
	if !e.FirstFailure.IsZero() {
		dst = append(dst, `,"first_failure":`...)
		if dst, ok = appendJSONTime(dst, e.FirstFailure); !ok {
			return dst, false
		}
	}
	if !e.LastFailure.IsZero() {
		dst = append(dst, `,"last_failure":`...)
		if dst, ok = appendJSONTime(dst, e.LastFailure); !ok {
			return dst, false
		}
	}
	if len(e.Labels) > 0 {
		dst = appendLabels(dst, e.Labels)
	}
	if s := &e.State; *s != (entry.SourceState{}) {
		dst = append(dst, `,"source_state":{`...)
		n := len(dst)
		dst = appendOptString(dst, `,"status":`, s.Status)
		if s.Handled {
			dst = append(dst, `,"handled":true`...)
		}
		dst = appendOptString(dst, `,"job_status":`, s.JobStatus)
		if s.ManualReviewRequired {
			dst = append(dst, `,"manual_review_required":true`...)
		}
		if s.ReprocessIneligible {
			dst = append(dst, `,"reprocess_ineligible":true`...)
		}
		dst = appendOptString(dst, `,"policy_snapshot":`, s.PolicySnapshot)
		dst = appendOptString(dst, `,"error_signature":`, s.ErrorSignature)
		dst = dropComma(dst, n)
		dst = append(dst, '}')
	}
	if len(e.History) > 0 {
		dst = append(dst, `,"failure_history":[`...)
		for i := range e.History {
			if i > 0 {
				dst = append(dst, ',')
			}
			f := &e.History[i]
			dst = append(dst, '{')
			n := len(dst)
			if f.Attempt != 0 {
				dst = append(dst, `,"attempt":`...)
				dst = strconv.AppendInt(dst, int64(f.Attempt), 10)
			}
			if !f.Time.IsZero() {
				dst = append(dst, `,"time":`...)
				if dst, ok = appendJSONTime(dst, f.Time); !ok {
					return dst, false
				}
			}
			dst = appendOptString(dst, `,"reason_code":`, f.ReasonCode)
			dst = appendOptString(dst, `,"error_type":`, f.ErrorType)
			dst = appendOptString(dst, `,"message":`, f.Message)
			dst = appendOptString(dst, `,"step":`, f.Step)
			dst = dropComma(dst, n)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = appendOptString(dst, `,"decode_error":`, e.DecodeError)
	return append(dst, '}'), true
}

// appendLabels appends `,"labels":{...}`, keys sorted as encoding/json
// sorts them (by their bytes).
func appendLabels(dst []byte, labels map[string]string) []byte {
	var small [16]string
	keys := small[:0]
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, `,"labels":{`...)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSONString(dst, labels[k])
	}
	return append(dst, '}')
}

// appendLedgerJSON appends r's JSON as json.Marshal writes it; ok false
// when it cannot be sure to.
func appendLedgerJSON(dst []byte, r *idempotency.Record) ([]byte, bool) {
	dst = append(dst, `{"key":`...)
	dst = appendJSONString(dst, r.Key)
	dst = append(dst, `,"state":`...)
	dst = appendJSONString(dst, string(r.State))
	dst = append(dst, `,"entry_ref":`...)
	dst = appendJSONString(dst, r.EntryRef)
	dst = append(dst, `,"payload_hash":`...)
	dst = appendJSONString(dst, r.PayloadHash)
	dst = append(dst, `,"replays":`...)
	dst = strconv.AppendInt(dst, int64(r.Replays), 10)
	dst = appendOptString(dst, `,"last_error":`, r.LastError)
	var ok bool
	dst = append(dst, `,"created":`...)
	if dst, ok = appendJSONTime(dst, r.Created); !ok {
		return dst, false
	}
	dst = append(dst, `,"updated":`...)
	if dst, ok = appendJSONTime(dst, r.Updated); !ok {
		return dst, false
	}
	if !r.Dispatched.IsZero() {
		dst = append(dst, `,"dispatched":`...)
		if dst, ok = appendJSONTime(dst, r.Dispatched); !ok {
			return dst, false
		}
	}
	if !r.FirstDispatched.IsZero() {
		dst = append(dst, `,"first_dispatched":`...)
		if dst, ok = appendJSONTime(dst, r.FirstDispatched); !ok {
			return dst, false
		}
	}
	dst = appendOptString(dst, `,"owner":`, r.Owner)
	if r.Rearmed != 0 {
		dst = append(dst, `,"rearmed":`...)
		dst = strconv.AppendInt(dst, int64(r.Rearmed), 10)
	}
	if r.NotSent != 0 {
		dst = append(dst, `,"not_sent":`...)
		dst = strconv.AppendInt(dst, int64(r.NotSent), 10)
	}
	return append(dst, '}'), true
}

// dropComma removes the comma the first field after an object's opening
// brace (at n) was written with.
func dropComma(dst []byte, n int) []byte {
	if len(dst) > n && dst[n] == ',' {
		return append(dst[:n], dst[n+1:]...)
	}
	return dst
}

// appendOptString appends key and s unless s is empty (omitempty).
func appendOptString(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return appendJSONString(append(dst, key...), s)
}

// appendJSONTime appends t as time.Time's MarshalJSON writes it; ok false
// where MarshalJSON fails (a year outside 0-9999, a zone offset of a day
// or more).
func appendJSONTime(dst []byte, t time.Time) ([]byte, bool) {
	dst = append(dst, '"')
	n0 := len(dst)
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	// MarshalJSON's own checks (time/format_rfc3339.go appendStrictRFC3339).
	if len(dst) < n0+len("2006-01-02T15:04:05Z") || dst[n0+4] != '-' {
		return dst, false
	}
	if dst[len(dst)-1] != 'Z' {
		c := dst[len(dst)-len("Z07:00")]
		h := dst[len(dst)-len("07:00"):]
		if ('0' <= c && c <= '9') || 10*(h[0]-'0')+(h[1]-'0') >= 24 {
			return dst, false
		}
	}
	return append(dst, '"'), true
}

// appendJSONString appends s as encoding/json writes a string: HTML
// characters, U+2028 and U+2029 escaped, an invalid UTF-8 byte as
// \ufffd (encoding/json's appendString with escapeHTML).
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs a look: most values
		// are ASCII ids, keys and words.
		for ; i+8 <= len(s); i += 8 {
			if !htmlPlain8(uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56) {
				break
			}
		}
		if i >= len(s) {
			break
		}
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// htmlPlain8 reports whether none of the eight bytes in w is a control
// character, '"', '\\', '<', '>', '&' or past ASCII ("Bit Twiddling
// Hacks": a word has a zero byte where (x-ones) & ^x & highs is set).
func htmlPlain8(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	has := func(c uint64) uint64 { x := w ^ (ones * c); return (x - ones) & ^x & highs }
	ctl := (w - ones*0x20) & ^w & highs
	return (w&highs)|ctl|has('"')|has('\\')|has('<')|has('>')|has('&') == 0
}
