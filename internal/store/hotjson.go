package store

import (
	"strconv"

	"github.com/replayctl/replayctl/internal/audit"
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
	dst, _, ok := appendEntryRecordJSONAt(dst, r)
	return dst, ok
}

// AppendEntryJSONAt is EncodeEntryHot's JSON of r (before compression),
// and where in it r's last_decision digits start (-1: r has none): a
// record worked out before the transaction that learns its decision's
// seq (bolt's PrepareEntry of a new entry) has them replaced there. ok
// false: encoding/json is needed (EncodeEntryHot knows when).
func AppendEntryJSONAt(dst []byte, r *EntryRecord) (out []byte, at int, ok bool) {
	return appendEntryRecordJSONAt(dst, r)
}

func appendEntryRecordJSONAt(dst []byte, r *EntryRecord) ([]byte, int, bool) {
	at := -1
	dst = append(dst, `{"entry":`...)
	dst, ok := audit.AppendEntryJSON(dst, &r.Entry)
	if !ok {
		return dst, at, false
	}
	dst = append(dst, `,"status":`...)
	dst = audit.AppendJSONString(dst, r.Status)
	dst = audit.AppendOptString(dst, `,"class":`, string(r.Class))
	dst = audit.AppendOptString(dst, `,"action":`, string(r.Action))
	dst = audit.AppendOptString(dst, `,"owner":`, r.Owner)
	dst = audit.AppendOptString(dst, `,"approver_group":`, r.ApproverGroup)
	dst = audit.AppendOptString(dst, `,"reason":`, r.Reason)
	if r.LastDecision != 0 {
		dst = append(dst, `,"last_decision":`...)
		at = len(dst)
		dst = strconv.AppendUint(dst, r.LastDecision, 10)
	}
	dst = audit.AppendOptString(dst, `,"evidence":`, r.Evidence)
	dst = audit.AppendOptString(dst, `,"approval_id":`, r.ApprovalID)
	dst = audit.AppendOptString(dst, `,"hold":`, r.Hold)
	dst = audit.AppendOptString(dst, `,"probe":`, r.Probe)
	dst = audit.AppendOptString(dst, `,"write_back_pending":`, r.WriteBackPending)
	if r.Settled {
		dst = append(dst, `,"settled":true`...)
	}
	dst = append(dst, `,"first_seen":`...)
	if dst, ok = audit.AppendJSONTime(dst, r.FirstSeen); !ok {
		return dst, at, false
	}
	dst = append(dst, `,"last_seen":`...)
	if dst, ok = audit.AppendJSONTime(dst, r.LastSeen); !ok {
		return dst, at, false
	}
	if !r.NextAttemptAt.IsZero() {
		dst = append(dst, `,"next_attempt_at":`...)
		if dst, ok = audit.AppendJSONTime(dst, r.NextAttemptAt); !ok {
			return dst, at, false
		}
	}
	if g := r.Group; g != nil {
		dst = append(dst, `,"group":{"source":`...)
		dst = audit.AppendJSONString(dst, g.Source)
		dst = append(dst, `,"topic":`...)
		dst = audit.AppendJSONString(dst, g.Topic)
		dst = append(dst, `,"class":`...)
		dst = audit.AppendJSONString(dst, g.Class)
		dst = append(dst, `,"error":`...)
		dst = audit.AppendJSONString(dst, g.Error)
		dst = append(dst, '}')
	}
	return append(dst, '}'), at, true
}

// appendLedgerJSON appends r's JSON as json.Marshal writes it; ok false
// when it cannot be sure to.
func appendLedgerJSON(dst []byte, r *idempotency.Record) ([]byte, bool) {
	dst = append(dst, `{"key":`...)
	dst = audit.AppendJSONString(dst, r.Key)
	dst = append(dst, `,"state":`...)
	dst = audit.AppendJSONString(dst, string(r.State))
	dst = append(dst, `,"entry_ref":`...)
	dst = audit.AppendJSONString(dst, r.EntryRef)
	dst = append(dst, `,"payload_hash":`...)
	dst = audit.AppendJSONString(dst, r.PayloadHash)
	dst = append(dst, `,"replays":`...)
	dst = strconv.AppendInt(dst, int64(r.Replays), 10)
	dst = audit.AppendOptString(dst, `,"last_error":`, r.LastError)
	var ok bool
	dst = append(dst, `,"created":`...)
	if dst, ok = audit.AppendJSONTime(dst, r.Created); !ok {
		return dst, false
	}
	dst = append(dst, `,"updated":`...)
	if dst, ok = audit.AppendJSONTime(dst, r.Updated); !ok {
		return dst, false
	}
	if !r.Dispatched.IsZero() {
		dst = append(dst, `,"dispatched":`...)
		if dst, ok = audit.AppendJSONTime(dst, r.Dispatched); !ok {
			return dst, false
		}
	}
	if !r.FirstDispatched.IsZero() {
		dst = append(dst, `,"first_dispatched":`...)
		if dst, ok = audit.AppendJSONTime(dst, r.FirstDispatched); !ok {
			return dst, false
		}
	}
	dst = audit.AppendOptString(dst, `,"owner":`, r.Owner)
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
