package audit

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/jsonenc"
	"github.com/replayctl/replayctl/internal/triage"
)

// The appenders below write JSON by hand, byte for byte what
// encoding/json writes: an audit record's body (Prepare) and, in the
// store, entry and ledger records (store/hotjson.go). encoding/json's
// reflection was a tenth of reconcile's CPU (issue 33). Strings are
// escaped as encoding/json escapes them (HTML characters, U+2028 and
// U+2029, an invalid UTF-8 byte as \ufffd); times are written as
// MarshalJSON writes them, and refused where it refuses them. The
// store's FuzzHotJSONMatchesEncodingJSON and this package's
// FuzzPrepareMatchesMarshal hold them to encoding/json.

// AppendEntryJSON appends e's JSON as json.Marshal writes it, without its
// payload (an audit record's input, an entry record's entry); ok false
// where it cannot be sure to (a time MarshalJSON refuses).
func AppendEntryJSON(dst []byte, e *entry.Entry) ([]byte, bool) {
	dst = append(dst, `{"id":`...)
	dst = AppendJSONString(dst, e.ID)
	dst = append(dst, `,"source":`...)
	dst = AppendJSONString(dst, e.Source)
	dst = AppendOptString(dst, `,"origin":`, e.Origin)
	dst = AppendOptString(dst, `,"scope":`, e.Scope)
	dst = AppendOptString(dst, `,"lineage":`, e.Lineage)
	if len(e.Ancestors) > 0 {
		dst = append(dst, `,"ancestors":[`...)
		for i, a := range e.Ancestors {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSONString(dst, a)
		}
		dst = append(dst, ']')
	}
	dst = AppendOptString(dst, `,"topic":`, e.Topic)
	dst = AppendOptString(dst, `,"reason_code":`, e.ReasonCode)
	dst = AppendOptString(dst, `,"message":`, e.Message)
	dst = append(dst, `,"attempts":`...)
	dst = strconv.AppendInt(dst, int64(e.Attempts), 10)
	dst = append(dst, `,"idempotency_key":`...)
	dst = AppendJSONString(dst, e.IdempotencyKey)
	if e.KeyDerived {
		dst = append(dst, `,"key_derived":true`...)
	}
	var ok bool
	if !e.FirstFailure.IsZero() {
		dst = append(dst, `,"first_failure":`...)
		if dst, ok = AppendJSONTime(dst, e.FirstFailure); !ok {
			return dst, false
		}
	}
	if !e.LastFailure.IsZero() {
		dst = append(dst, `,"last_failure":`...)
		if dst, ok = AppendJSONTime(dst, e.LastFailure); !ok {
			return dst, false
		}
	}
	if len(e.Labels) > 0 {
		dst = appendLabels(dst, e.Labels)
	}
	if s := &e.State; *s != (entry.SourceState{}) {
		dst = append(dst, `,"source_state":{`...)
		n := len(dst)
		dst = AppendOptString(dst, `,"status":`, s.Status)
		if s.Handled {
			dst = append(dst, `,"handled":true`...)
		}
		dst = AppendOptString(dst, `,"job_status":`, s.JobStatus)
		if s.ManualReviewRequired {
			dst = append(dst, `,"manual_review_required":true`...)
		}
		if s.ReprocessIneligible {
			dst = append(dst, `,"reprocess_ineligible":true`...)
		}
		dst = AppendOptString(dst, `,"policy_snapshot":`, s.PolicySnapshot)
		dst = AppendOptString(dst, `,"error_signature":`, s.ErrorSignature)
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
				if dst, ok = AppendJSONTime(dst, f.Time); !ok {
					return dst, false
				}
			}
			dst = AppendOptString(dst, `,"reason_code":`, f.ReasonCode)
			dst = AppendOptString(dst, `,"error_type":`, f.ErrorType)
			dst = AppendOptString(dst, `,"message":`, f.Message)
			dst = AppendOptString(dst, `,"step":`, f.Step)
			dst = dropComma(dst, n)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = AppendOptString(dst, `,"decode_error":`, e.DecodeError)
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
		dst = AppendJSONString(dst, k)
		dst = append(dst, ':')
		dst = AppendJSONString(dst, labels[k])
	}
	return append(dst, '}')
}

// dropComma removes the comma the first field after an object's opening
// brace (at n) was written with.
func dropComma(dst []byte, n int) []byte {
	if len(dst) > n && dst[n] == ',' {
		return append(dst[:n], dst[n+1:]...)
	}
	return dst
}

// AppendOptString appends key (`,"name":`) and s unless s is empty
// (omitempty).
func AppendOptString(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return AppendJSONString(append(dst, key...), s)
}

// AppendJSONTime appends t as time.Time's MarshalJSON writes it; ok false
// where MarshalJSON fails (a year outside 0-9999, a zone offset of a day
// or more).
func AppendJSONTime(dst []byte, t time.Time) ([]byte, bool) {
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

// AppendJSONString appends s as encoding/json writes a string
// (jsonenc.AppendString).
func AppendJSONString(dst []byte, s string) []byte { return jsonenc.AppendString(dst, s) }

// appendRecordJSON appends r's JSON as json.Marshal writes it; ok false
// where it cannot be sure to (an input with its payload, a time
// MarshalJSON refuses, a multiplier in exponent form). The detail is
// encoding/json's own: json.Marshal of the RawMessage alone writes the
// bytes it writes inside the record (compacted, HTML escaped).
func appendRecordJSON(dst []byte, r *Record) ([]byte, bool) {
	if r.Input != nil && len(r.Input.Payload) > 0 {
		return dst, false
	}
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, r.Seq, 10)
	dst = append(dst, `,"time":`...)
	var ok bool
	if dst, ok = AppendJSONTime(dst, r.Time); !ok {
		return dst, false
	}
	dst = append(dst, `,"actor":`...)
	dst = AppendJSONString(dst, r.Actor)
	dst = append(dst, `,"kind":`...)
	dst = AppendJSONString(dst, r.Kind)
	dst = AppendOptString(dst, `,"entry_ref":`, r.EntryRef)
	dst = AppendOptString(dst, `,"entry_id":`, r.EntryID)
	dst = AppendOptString(dst, `,"source":`, r.Source)
	dst = AppendOptString(dst, `,"idempotency_key":`, r.Key)
	if r.Decision != nil {
		dst = append(dst, `,"decision":`...)
		if dst, ok = appendDecisionJSON(dst, r.Decision); !ok {
			return dst, false
		}
	}
	if r.Input != nil {
		dst = append(dst, `,"input":`...)
		if dst, ok = AppendEntryJSON(dst, r.Input); !ok {
			return dst, false
		}
	}
	dst = AppendOptString(dst, `,"action":`, string(r.Action))
	dst = AppendOptString(dst, `,"reason":`, r.Reason)
	dst = AppendOptString(dst, `,"policy_snapshot":`, r.PolicySnapshot)
	if r.SnapshotKept {
		dst = append(dst, `,"snapshot_kept":true`...)
	}
	dst = AppendOptString(dst, `,"ledger_before":`, r.LedgerBefore)
	dst = AppendOptString(dst, `,"ledger_after":`, r.LedgerAfter)
	dst = AppendOptString(dst, `,"outcome":`, r.Outcome)
	if len(r.Detail) > 0 {
		d, err := json.Marshal(r.Detail)
		if err != nil {
			return dst, false
		}
		dst = append(dst, `,"detail":`...)
		dst = append(dst, d...)
	}
	return append(dst, '}'), true
}

// appendDecisionJSON appends d's JSON as json.Marshal writes it; ok false
// where it cannot be sure to (a multiplier encoding/json writes in
// exponent form, or refuses; a time MarshalJSON refuses).
func appendDecisionJSON(dst []byte, d *triage.Decision) ([]byte, bool) {
	dst = append(dst, `{"entry_id":`...)
	dst = AppendJSONString(dst, d.EntryID)
	dst = append(dst, `,"entry_ref":`...)
	dst = AppendJSONString(dst, d.EntryRef)
	dst = append(dst, `,"source":`...)
	dst = AppendJSONString(dst, d.Source)
	dst = AppendOptString(dst, `,"origin":`, d.Origin)
	dst = AppendOptString(dst, `,"topic":`, d.Topic)
	dst = append(dst, `,"idempotency_key":`...)
	dst = AppendJSONString(dst, d.IdempotencyKey)
	dst = append(dst, `,"payload_hash":`...)
	dst = AppendJSONString(dst, d.PayloadHash)
	dst = append(dst, `,"class":`...)
	dst = AppendJSONString(dst, string(d.Class))
	if d.Unrecognised {
		dst = append(dst, `,"unrecognised":true`...)
	}
	dst = append(dst, `,"reason_code":`...)
	dst = AppendJSONString(dst, d.ReasonCode)
	dst = append(dst, `,"rule":`...)
	dst = AppendJSONString(dst, d.Rule)
	dst = append(dst, `,"proposed_action":`...)
	dst = AppendJSONString(dst, string(d.ProposedAction))
	dst = AppendOptString(dst, `,"policy_action":`, string(d.PolicyAction))
	dst = AppendOptString(dst, `,"policy_error":`, d.PolicyError)
	dst = append(dst, `,"action":`...)
	dst = AppendJSONString(dst, string(d.Action))
	dst = append(dst, `,"reasons":`...)
	if d.Reasons == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, r := range d.Reasons {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSONString(dst, r)
		}
		dst = append(dst, ']')
	}
	if d.KeyLifetimeExceeded {
		dst = append(dst, `,"key_lifetime_exceeded":true`...)
	}
	dst = AppendOptString(dst, `,"owner":`, d.Owner)
	dst = AppendOptString(dst, `,"approver_group":`, d.ApproverGroup)
	dst = append(dst, `,"max_replays":`...)
	dst = strconv.AppendInt(dst, int64(d.MaxReplays), 10)
	// Backoff's MarshalJSON: strategy, durations as Go writes them, the
	// multiplier as encoding/json writes a float64 ('f' form inside
	// [1e-6, 1e21), else exponent form: left to encoding/json).
	b := &d.Backoff
	if m := math.Abs(b.Multiplier); m != 0 && (m < 1e-6 || m >= 1e21) || math.IsNaN(b.Multiplier) || math.IsInf(b.Multiplier, 0) {
		return dst, false
	}
	dst = append(dst, `,"backoff":{"strategy":`...)
	dst = AppendJSONString(dst, b.Strategy)
	dst = append(dst, `,"initial":`...)
	dst = AppendJSONString(dst, b.Initial.String())
	dst = append(dst, `,"max":`...)
	dst = AppendJSONString(dst, b.Max.String())
	dst = append(dst, `,"multiplier":`...)
	dst = strconv.AppendFloat(dst, b.Multiplier, 'f', -1, 64)
	dst = append(dst, `},"ledger":{`...)
	n := len(dst)
	l := &d.Ledger
	dst = AppendOptString(dst, `,"state":`, l.State)
	if l.Replays != 0 {
		dst = append(dst, `,"replays":`...)
		dst = strconv.AppendInt(dst, int64(l.Replays), 10)
	}
	dst = AppendOptString(dst, `,"payload_hash":`, l.PayloadHash)
	if l.Approved {
		dst = append(dst, `,"approved":true`...)
	}
	dst = AppendOptString(dst, `,"probe":`, l.Probe)
	dst = AppendOptString(dst, `,"lineage":`, l.Lineage)
	if l.LineageReplays != 0 {
		dst = append(dst, `,"lineage_replays":`...)
		dst = strconv.AppendInt(dst, int64(l.LineageReplays), 10)
	}
	var ok bool
	if !l.FirstDispatch.IsZero() {
		dst = append(dst, `,"first_dispatch":`...)
		if dst, ok = AppendJSONTime(dst, l.FirstDispatch); !ok {
			return dst, false
		}
	}
	if !l.At.IsZero() {
		dst = append(dst, `,"at":`...)
		if dst, ok = AppendJSONTime(dst, l.At); !ok {
			return dst, false
		}
	}
	dst = dropComma(dst, n)
	dst = append(dst, `},"policy_snapshot":`...)
	dst = AppendJSONString(dst, d.PolicySnapshot)
	if h := d.GroupHold; h != nil {
		dst = append(dst, `,"group_hold":{"group":`...)
		dst = AppendJSONString(dst, h.Group)
		dst = append(dst, `,"reason":`...)
		dst = AppendJSONString(dst, h.Reason)
		if !h.Until.IsZero() {
			dst = append(dst, `,"until":`...)
			if dst, ok = AppendJSONTime(dst, h.Until); !ok {
				return dst, false
			}
		}
		dst = AppendOptString(dst, `,"by":`, h.By)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"evidence_hash":`...)
	dst = AppendJSONString(dst, d.EvidenceHash)
	return append(dst, '}'), true
}
