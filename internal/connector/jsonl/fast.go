package jsonl

import (
	"time"

	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/jsonscan"
)

// The fast path decodes replayctl's own line in one pass, without
// reflection, as internal/connector/kafka/envdecode.go does for the Kafka
// envelope: the strict json.Decoder cost ~24 µs of CPU a replay in
// BenchmarkSafeCPU (issue 33). It takes only a line it is sure gives what
// the strict decoder gives: one object of known fields, each at most once,
// named in ASCII without an escape (encoding/json matches names ignoring
// case, Unicode case included: "ſ" is "s" to it), strings for the text
// fields, a whole number that fits for attempts, an object of strings for
// labels, any valid JSON for payload (kept byte for byte), null wherever
// encoding/json leaves the field at its zero, RFC 3339 times. Anything
// else, a bad line above all, goes to the strict decoder, whose errors the
// quarantine reasons and file:line messages are made of.

// Field numbers of jsonlRecord; the text fields first.
const (
	fID = iota
	fTopic
	fReason
	fMessage
	fKey
	fState
	fFirst
	fLast
	fAttempts
	fLabels
	fPayload

	nText = fAttempts // the fields before it are strings (times as strings)
)

// fieldOf is the field an object member's name stands for, -1 for an
// unknown one: a name as encoding/json matches it, exactly or ignoring
// ASCII case (the caller has made sure name is ASCII).
func fieldOf(name []byte) int {
	switch len(name) {
	case 2:
		if jsonscan.IsField(name, "id") {
			return fID
		}
	case 5:
		if jsonscan.IsField(name, "topic") {
			return fTopic
		}
	case 6:
		if jsonscan.IsField(name, "labels") {
			return fLabels
		}
	case 7:
		if jsonscan.IsField(name, "message") {
			return fMessage
		}
		if jsonscan.IsField(name, "payload") {
			return fPayload
		}
	case 8:
		if jsonscan.IsField(name, "attempts") {
			return fAttempts
		}
	case 11:
		if jsonscan.IsField(name, "reason_code") {
			return fReason
		}
	case 12:
		if jsonscan.IsField(name, "last_failure") {
			return fLast
		}
		if jsonscan.IsField(name, "source_state") {
			return fState
		}
	case 13:
		if jsonscan.IsField(name, "first_failure") {
			return fFirst
		}
	case 15:
		if jsonscan.IsField(name, "idempotency_key") {
			return fKey
		}
	}
	return -1
}

// labelSpan is one member of labels.
type labelSpan struct{ key, val jsonscan.Span }

// decodeFast is the fast path of decodeJSONL: ok false means "use the
// strict decoder", and then *e is untouched.
func decodeFast(raw []byte, e *entry.Entry) (ok bool) {
	d := scanner{jsonscan.Scanner{D: raw}}
	var (
		text     [nText]jsonscan.Span
		attempts int
		payload  jsonscan.Span
		lbuf     [8]labelSpan
		labels   = lbuf[:0]
		seen     uint16
	)
	d.WS()
	members := d.Members(func(name jsonscan.Span) bool {
		if name.Esc {
			return false
		}
		f := fieldOf(raw[name.Start:name.End])
		if f < 0 || seen&(1<<f) != 0 {
			return false // unknown (an error) or a duplicate (merged)
		}
		seen |= 1 << f
		var ok bool
		switch {
		case d.Peek() == 'n':
			// null leaves each field at its zero
			return d.Word("null")
		case f < nText:
			return d.Str(&text[f])
		case f == fAttempts:
			attempts, ok = d.int()
			return ok
		case f == fLabels:
			labels, ok = d.labels(labels)
			return ok
		default: // fPayload
			payload.Start = d.I
			ok = d.Skip(0)
			payload.End = d.I
			return ok
		}
	})
	if !members {
		return false
	}
	d.WS()
	if d.I != len(raw) || text[fID].End == text[fID].Start {
		return false // trailing data; missing id
	}

	var times [2]time.Time // first_failure, last_failure
	for i := range times {
		if s := str(raw, text[fFirst+i]); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return false
			}
			times[i] = t
		}
	}
	r := entry.Entry{
		ID:             str(raw, text[fID]),
		Topic:          str(raw, text[fTopic]),
		ReasonCode:     str(raw, text[fReason]),
		Message:        str(raw, text[fMessage]),
		Attempts:       attempts,
		IdempotencyKey: str(raw, text[fKey]),
		State:          entry.SourceState{Status: str(raw, text[fState])},
	}
	r.State.Handled = records.HandledStatus(r.State.Status)
	if len(labels) > 0 {
		r.Labels = make(map[string]string, len(labels))
		for _, l := range labels {
			// in order: a later duplicate key wins, as in encoding/json
			r.Labels[str(raw, l.key)] = str(raw, l.val)
		}
	}
	if p := raw[payload.Start:payload.End]; records.Present(p) {
		r.Payload = append([]byte(nil), p...)
	}
	r.FirstFailure, r.LastFailure = records.OrBoth(times[0], times[1])
	*e = r
	return true
}

// scanner walks a line, checking it as encoding/json's scanner does.
type scanner struct{ jsonscan.Scanner }

// int reads a number encoding/json stores in an int: an integer literal,
// no fraction or exponent, of up to 18 digits (a longer one may overflow;
// the strict decoder decides).
func (d *scanner) int() (int, bool) {
	neg := d.Lit('-')
	start := d.I
	var n int
	for d.I < len(d.D) && '0' <= d.D[d.I] && d.D[d.I] <= '9' {
		n = n*10 + int(d.D[d.I]-'0')
		d.I++
	}
	digits := d.I - start
	if digits == 0 || digits > 18 || (digits > 1 && d.D[start] == '0') {
		return 0, false
	}
	if c := d.Peek(); c == '.' || c == 'e' || c == 'E' {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// labels reads an object of strings.
func (d *scanner) labels(l []labelSpan) ([]labelSpan, bool) {
	ok := d.Members(func(key jsonscan.Span) bool {
		kv := labelSpan{key: key}
		if !d.Str(&kv.val) { // null too: the strict decoder decides
			return false
		}
		l = append(l, kv)
		return true
	})
	return l, ok
}

// str is s's contents as a string of its own (as encoding/json gives
// each: one kept alone, an id in a map, keeps no more of the line alive).
func str(raw []byte, s jsonscan.Span) string {
	if !s.Esc {
		return string(raw[s.Start:s.End])
	}
	var buf [256]byte
	return string(jsonscan.AppendUnquote(buf[:0], raw[s.Start:s.End]))
}
