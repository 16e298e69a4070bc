package kafka

import (
	"encoding/base64"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector/brokermsg"
	"github.com/replayctl/replayctl/internal/jsonscan"
)

// parts is what record needs from an envelope.
type parts struct {
	topic      string
	key, value []byte
	headers    []kgo.RecordHeader
}

// binSpans is a brokermsg.Bin as found: its text and base64 strings.
type binSpans struct{ text, b64 jsonscan.Span }

// headerSpans is where one header's key and value are.
type headerSpans struct {
	key jsonscan.Span
	val binSpans
}

// envDecoder walks an envelope once, without reflection, for what record
// needs. It gives up (ok false) on anything it is not sure gives what
// json.Unmarshal gives: invalid JSON, a duplicate field, a field name
// with an escape or a non-ASCII byte (encoding/json folds Unicode case),
// a value of the wrong type, bad base64. The caller then uses
// json.Unmarshal, which gives the same result or the same error.
type envDecoder struct {
	jsonscan.Scanner
	arena []byte // every decoded byte string, one allocation
}

// decodeEnvelope is the fast path of record; ok false means "use
// encoding/json".
func decodeEnvelope(data []byte) (p parts, ok bool) {
	dec := envDecoder{Scanner: jsonscan.Scanner{D: data}}
	var (
		body, body64, orig jsonscan.Span
		key                binSpans
		hdrs               []headerSpans
		seen               uint16
	)
	once := func(bit uint16) bool {
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	}
	dec.WS()
	ok = dec.object(func(name []byte) bool {
		// null leaves every field here at its zero
		null := dec.Peek() == 'n'
		if null && !dec.Word("null") {
			return false
		}
		switch {
		case jsonscan.IsField(name, "body"):
			return once(1) && (null || dec.Str(&body))
		case jsonscan.IsField(name, "body_base64"):
			return once(2) && (null || dec.Str(&body64))
		case jsonscan.IsField(name, "key"):
			return once(4) && (null || dec.bin(&key))
		case jsonscan.IsField(name, "headers"):
			return once(8) && (null || dec.headers(&hdrs))
		case jsonscan.IsField(name, "original_topic"):
			return once(16) && (null || dec.Str(&orig))
		case jsonscan.IsField(name, "topic"):
			var s jsonscan.Span
			return once(32) && (null || dec.Str(&s))
		case jsonscan.IsField(name, "partition"):
			return once(64) && (null || dec.integer(32))
		case jsonscan.IsField(name, "offset"):
			return once(128) && (null || dec.integer(64))
		case jsonscan.IsField(name, "timestamp"):
			return once(256) && (null || dec.timestamp())
		case jsonscan.IsField(name, "original_partition"):
			return once(512) && (null || dec.integer(32))
		case jsonscan.IsField(name, "original_offset"):
			return once(1024) && (null || dec.integer(64))
		}
		return null || dec.Skip(0)
	})
	if !ok {
		return p, false
	}
	dec.WS()
	if dec.I != len(dec.D) {
		return p, false
	}
	dec.arena = make([]byte, 0, len(data))
	if orig.Set {
		p.topic = string(dec.text(orig))
	}
	switch {
	case body.Set:
		p.value = dec.text(body)
	case body64.Set && body64.End > body64.Start:
		if p.value, ok = dec.base64(body64); !ok {
			return p, false
		}
	}
	if p.key, ok = dec.binBytes(key); !ok {
		return p, false
	}
	if len(hdrs) > 0 {
		p.headers = make([]kgo.RecordHeader, len(hdrs), len(hdrs)+3)
		for n, h := range hdrs {
			if h.key.Set {
				p.headers[n].Key = headerKey(dec.text(h.key))
			}
			if p.headers[n].Value, ok = dec.binBytes(h.val); !ok {
				return p, false
			}
		}
	}
	return p, true
}

// headerKey is k as a string: the headers Spring Kafka, Kafka Connect and
// replayctl write are their constants (no allocation; a replay converted
// each header key afresh), any other key a new string.
func headerKey(k []byte) string {
	switch string(k) {
	case dltTopic:
		return dltTopic
	case dltPartition:
		return dltPartition
	case dltOffset:
		return dltOffset
	case dltFQCN:
		return dltFQCN
	case dltCauseFQCN:
		return dltCauseFQCN
	case dltMessage:
		return dltMessage
	case dltStack:
		return dltStack
	case connTopic:
		return connTopic
	case connPartition:
		return connPartition
	case connOffset:
		return connOffset
	case connClass:
		return connClass
	case connMessage:
		return connMessage
	case connStacktrace:
		return connStacktrace
	case brokermsg.HeaderKey:
		return brokermsg.HeaderKey
	case brokermsg.HeaderCount:
		return brokermsg.HeaderCount
	case brokermsg.HeaderLineage:
		return brokermsg.HeaderLineage
	}
	return string(k)
}

// object reads a JSON object, calling field for each member with the
// decoder at the member's value; field reads the value (an empty object
// calls nothing). A name with an escape or a non-ASCII byte gives up.
func (d *envDecoder) object(field func(name []byte) bool) bool {
	return d.Members(func(s jsonscan.Span) bool { return !s.Esc && field(d.D[s.Start:s.End]) })
}

// firstOf is a bit set of the fields an object has had: encoding/json
// merges a duplicate into the first, which the fast path leaves to it.
type firstOf uint8

// first reports whether bit's field comes for the first time.
func (f *firstOf) first(bit firstOf) bool {
	if *f&bit != 0 {
		return false
	}
	*f |= bit
	return true
}

// bin reads a brokermsg.Bin object.
func (d *envDecoder) bin(b *binSpans) bool {
	var seen firstOf
	return d.object(func(name []byte) bool {
		var dst *jsonscan.Span
		switch {
		case jsonscan.IsField(name, "text"):
			dst = &b.text
			if !seen.first(1) {
				return false
			}
		case jsonscan.IsField(name, "base64"):
			dst = &b.b64
			if !seen.first(2) {
				return false
			}
		default:
			return d.Skip(1)
		}
		if d.Peek() == 'n' {
			return d.Word("null")
		}
		return d.Str(dst)
	})
}

// headers reads the headers array: header objects or nulls.
func (d *envDecoder) headers(hdrs *[]headerSpans) bool {
	if !d.Lit('[') {
		return false
	}
	d.WS()
	if d.Lit(']') {
		return true
	}
	for {
		d.WS()
		var h headerSpans
		var ok bool
		if d.Peek() == 'n' {
			ok = d.Word("null")
		} else {
			ok = d.header(&h.key, &h.val)
		}
		if *hdrs == nil {
			*hdrs = make([]headerSpans, 0, 16) // one allocation for most records' headers
		}
		*hdrs = append(*hdrs, h)
		d.WS()
		if d.Lit(']') {
			return ok
		}
		if !ok || !d.Lit(',') {
			return false
		}
	}
}

// header reads one {"key":..., "value":{...}} object.
func (d *envDecoder) header(k *jsonscan.Span, v *binSpans) bool {
	var seen firstOf
	return d.object(func(name []byte) bool {
		null := d.Peek() == 'n'
		switch {
		case jsonscan.IsField(name, "key"):
			if !seen.first(1) {
				return false
			}
			if null {
				return d.Word("null")
			}
			return d.Str(k)
		case jsonscan.IsField(name, "value"):
			if !seen.first(2) {
				return false
			}
			if null {
				return d.Word("null")
			}
			return d.bin(v)
		}
		return d.Skip(1)
	})
}

// integer reads a number encoding/json stores in an int of that size.
func (d *envDecoder) integer(bits int) bool {
	start := d.I
	if !d.Number() {
		return false
	}
	_, err := strconv.ParseInt(string(d.D[start:d.I]), 10, bits)
	return err == nil
}

// timestamp reads a value as time.Time's UnmarshalJSON takes it.
func (d *envDecoder) timestamp() bool {
	start := d.I
	if !d.Skip(1) {
		return false
	}
	var t time.Time
	return t.UnmarshalJSON(d.D[start:d.I]) == nil
}

// text appends s's decoded contents to the arena and returns them, a
// non-nil slice even when empty.
func (d *envDecoder) text(s jsonscan.Span) []byte {
	start := len(d.arena)
	if !s.Esc {
		d.arena = append(d.arena, d.D[s.Start:s.End]...)
	} else {
		d.arena = jsonscan.AppendUnquote(d.arena, d.D[s.Start:s.End])
	}
	return d.arena[start:len(d.arena):len(d.arena)]
}

// base64 decodes s as base64.StdEncoding.DecodeString does.
func (d *envDecoder) base64(s jsonscan.Span) ([]byte, bool) {
	if s.Esc {
		return nil, false
	}
	src := d.D[s.Start:s.End]
	start := len(d.arena)
	n := base64.StdEncoding.DecodedLen(len(src))
	d.arena = slices.Grow(d.arena, n)[:start+n]
	m, err := base64.StdEncoding.Decode(d.arena[start:], src)
	if err != nil {
		return nil, false
	}
	d.arena = d.arena[:start+m]
	return d.arena[start : start+m : start+m], true
}

// binBytes is brokermsg.Bin.Bytes.
func (d *envDecoder) binBytes(b binSpans) ([]byte, bool) {
	switch {
	case b.text.Set:
		return d.text(b.text), true
	case b.b64.Set:
		return d.base64(b.b64)
	}
	return nil, true
}
