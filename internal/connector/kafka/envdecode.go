package kafka

import (
	"encoding/base64"
	"encoding/binary"
	"slices"
	"strconv"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replayctl/replayctl/internal/connector/brokermsg"
)

// parts is what record needs from an envelope.
type parts struct {
	topic      string
	key, value []byte
	headers    []kgo.RecordHeader
}

// span is a JSON string's contents in the payload; esc when it holds a
// backslash escape, invalid UTF-8 or anything else unquote must rewrite.
type span struct {
	start, end int
	set, esc   bool
}

// binSpans is a brokermsg.Bin as found: its text and base64 strings.
type binSpans struct{ text, b64 span }

// headerSpans is where one header's key and value are.
type headerSpans struct {
	key span
	val binSpans
}

// envDecoder walks an envelope once, without reflection, for what record
// needs. It gives up (ok false) on anything it is not sure gives what
// json.Unmarshal gives: invalid JSON, a duplicate field, a field name
// with an escape or a non-ASCII byte (encoding/json folds Unicode case),
// a value of the wrong type, bad base64. The caller then uses
// json.Unmarshal, which gives the same result or the same error.
type envDecoder struct {
	d     []byte
	i     int
	arena []byte // every decoded byte string, one allocation
}

const maxDepth = 200

// decodeEnvelope is the fast path of record; ok false means "use
// encoding/json".
func decodeEnvelope(data []byte) (p parts, ok bool) {
	dec := envDecoder{d: data}
	var (
		body, body64, orig span
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
	dec.ws()
	ok = dec.object(func(name []byte) bool {
		// null leaves every field here at its zero
		null := dec.peek() == 'n'
		if null && !dec.word("null") {
			return false
		}
		switch {
		case is(name, "body"):
			return once(1) && (null || dec.str(&body))
		case is(name, "body_base64"):
			return once(2) && (null || dec.str(&body64))
		case is(name, "key"):
			return once(4) && (null || dec.bin(&key))
		case is(name, "headers"):
			return once(8) && (null || dec.headers(&hdrs))
		case is(name, "original_topic"):
			return once(16) && (null || dec.str(&orig))
		case is(name, "topic"):
			var s span
			return once(32) && (null || dec.str(&s))
		case is(name, "partition"):
			return once(64) && (null || dec.integer(32))
		case is(name, "offset"):
			return once(128) && (null || dec.integer(64))
		case is(name, "timestamp"):
			return once(256) && (null || dec.timestamp())
		case is(name, "original_partition"):
			return once(512) && (null || dec.integer(32))
		case is(name, "original_offset"):
			return once(1024) && (null || dec.integer(64))
		}
		return null || dec.skip(0)
	})
	if !ok {
		return p, false
	}
	dec.ws()
	if dec.i != len(dec.d) {
		return p, false
	}
	dec.arena = make([]byte, 0, len(data))
	if orig.set {
		p.topic = string(dec.text(orig))
	}
	switch {
	case body.set:
		p.value = dec.text(body)
	case body64.set && body64.end > body64.start:
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
			if h.key.set {
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

// is matches a field name as encoding/json does for an ASCII name:
// exactly or ignoring ASCII case.
func is(name []byte, field string) bool {
	if len(name) != len(field) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != field[i] {
			return false
		}
	}
	return true
}

func (d *envDecoder) peek() byte {
	if d.i < len(d.d) {
		return d.d[d.i]
	}
	return 0
}

func (d *envDecoder) ws() {
	for d.i < len(d.d) {
		switch d.d[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *envDecoder) lit(c byte) bool {
	if d.i < len(d.d) && d.d[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *envDecoder) word(w string) bool {
	if len(d.d)-d.i >= len(w) && string(d.d[d.i:d.i+len(w)]) == w {
		d.i += len(w)
		return true
	}
	return false
}

// str reads a JSON string into s, checking it as encoding/json's scanner
// does.
func (d *envDecoder) str(s *span) bool {
	if !d.lit('"') {
		return false
	}
	s.start, s.set, s.esc = d.i, true, false
	for d.i < len(d.d) {
		d.i += plainRun(d.d[d.i:], true)
		if d.i >= len(d.d) {
			break
		}
		c := d.d[d.i]
		switch {
		case c == '"':
			s.end = d.i
			d.i++
			return true
		case c == '\\':
			s.esc = true
			if d.i+1 >= len(d.d) {
				return false
			}
			switch d.d[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if d.i+6 > len(d.d) || hex4(d.d[d.i+2:d.i+6]) < 0 {
					return false
				}
				d.i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			s.esc = true // may need U+FFFD; unquote decides
			d.i++
		default:
			d.i++
		}
	}
	return false
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// object reads a JSON object, calling field for each member with the
// decoder at the member's value; field reads the value (an empty object
// calls nothing). A name with an escape or a non-ASCII byte gives up.
func (d *envDecoder) object(field func(name []byte) bool) bool {
	return d.members(func(s span) bool { return !s.esc && field(d.d[s.start:s.end]) })
}

// members reads a JSON object, calling field with each member's name
// and the decoder at the member's value, which field reads.
func (d *envDecoder) members(field func(name span) bool) bool {
	if !d.lit('{') {
		return false
	}
	d.ws()
	if d.lit('}') {
		return true
	}
	for {
		var s span
		if !d.str(&s) {
			return false
		}
		d.ws()
		if !d.lit(':') {
			return false
		}
		d.ws()
		if !field(s) {
			return false
		}
		d.ws()
		if d.lit('}') {
			return true
		}
		if !d.lit(',') {
			return false
		}
		d.ws()
	}
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
		var dst *span
		switch {
		case is(name, "text"):
			dst = &b.text
			if !seen.first(1) {
				return false
			}
		case is(name, "base64"):
			dst = &b.b64
			if !seen.first(2) {
				return false
			}
		default:
			return d.skip(1)
		}
		if d.peek() == 'n' {
			return d.word("null")
		}
		return d.str(dst)
	})
}

// headers reads the headers array: header objects or nulls.
func (d *envDecoder) headers(hdrs *[]headerSpans) bool {
	if !d.lit('[') {
		return false
	}
	d.ws()
	if d.lit(']') {
		return true
	}
	for {
		d.ws()
		var h headerSpans
		var ok bool
		if d.peek() == 'n' {
			ok = d.word("null")
		} else {
			ok = d.header(&h.key, &h.val)
		}
		if *hdrs == nil {
			*hdrs = make([]headerSpans, 0, 16) // one allocation for most records' headers
		}
		*hdrs = append(*hdrs, h)
		d.ws()
		if d.lit(']') {
			return ok
		}
		if !ok || !d.lit(',') {
			return false
		}
	}
}

// header reads one {"key":..., "value":{...}} object.
func (d *envDecoder) header(k *span, v *binSpans) bool {
	var seen firstOf
	return d.object(func(name []byte) bool {
		null := d.peek() == 'n'
		switch {
		case is(name, "key"):
			if !seen.first(1) {
				return false
			}
			if null {
				return d.word("null")
			}
			return d.str(k)
		case is(name, "value"):
			if !seen.first(2) {
				return false
			}
			if null {
				return d.word("null")
			}
			return d.bin(v)
		}
		return d.skip(1)
	})
}

// integer reads a number encoding/json stores in an int of that size.
func (d *envDecoder) integer(bits int) bool {
	start := d.i
	if !d.number() {
		return false
	}
	_, err := strconv.ParseInt(string(d.d[start:d.i]), 10, bits)
	return err == nil
}

// timestamp reads a value as time.Time's UnmarshalJSON takes it.
func (d *envDecoder) timestamp() bool {
	start := d.i
	if !d.skip(1) {
		return false
	}
	var t time.Time
	return t.UnmarshalJSON(d.d[start:d.i]) == nil
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *envDecoder) number() bool {
	d.lit('-')
	switch c := d.peek(); {
	case c == '0':
		d.i++
	case '1' <= c && c <= '9':
		d.digits()
	default:
		return false
	}
	if d.lit('.') {
		if !d.digits() {
			return false
		}
	}
	if c := d.peek(); c == 'e' || c == 'E' {
		d.i++
		if c := d.peek(); c == '+' || c == '-' {
			d.i++
		}
		if !d.digits() {
			return false
		}
	}
	return true
}

func (d *envDecoder) digits() bool {
	start := d.i
	for d.i < len(d.d) && '0' <= d.d[d.i] && d.d[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// skip reads any value.
func (d *envDecoder) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch c := d.peek(); {
	case c == '"':
		var s span
		return d.str(&s)
	case c == '{':
		return d.members(func(span) bool { return d.skip(depth + 1) })
	case c == '[':
		d.i++
		d.ws()
		if d.lit(']') {
			return true
		}
		for {
			d.ws()
			if !d.skip(depth + 1) {
				return false
			}
			d.ws()
			if d.lit(']') {
				return true
			}
			if !d.lit(',') {
				return false
			}
		}
	case c == 't':
		return d.word("true")
	case c == 'f':
		return d.word("false")
	case c == 'n':
		return d.word("null")
	default:
		return d.number()
	}
}

// text appends s's decoded contents to the arena and returns them, a
// non-nil slice even when empty.
func (d *envDecoder) text(s span) []byte {
	start := len(d.arena)
	if !s.esc {
		d.arena = append(d.arena, d.d[s.start:s.end]...)
	} else {
		d.arena = unquote(d.arena, d.d[s.start:s.end])
	}
	return d.arena[start:len(d.arena):len(d.arena)]
}

// base64 decodes s as base64.StdEncoding.DecodeString does.
func (d *envDecoder) base64(s span) ([]byte, bool) {
	if s.esc {
		return nil, false
	}
	src := d.d[s.start:s.end]
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
	case b.text.set:
		return d.text(b.text), true
	case b.b64.set:
		return d.base64(b.b64)
	}
	return nil, true
}

// unquote appends a checked JSON string's contents as encoding/json
// decodes them: escapes resolved, a surrogate pair joined, a lone
// surrogate and each byte of invalid UTF-8 as U+FFFD.
func unquote(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		if n := plainRun(s[r:], false); n > 0 {
			dst = append(dst, s[r:r+n]...)
			if r += n; r >= len(s) {
				break
			}
		}
		c := s[r]
		switch {
		case c == '\\':
			switch e := s[r+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := hex4(s[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					rr1 := rune(-1)
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						rr1 = hex4(s[r+2:])
					}
					if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
						r += 6
						dst = utf8.AppendRune(dst, dec)
						continue
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			if rr == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, unicode.ReplacementChar)
			} else {
				dst = append(dst, s[r:r+size]...)
			}
			r += size
		}
	}
	return dst
}

// plainRun is the length of b's leading run of bytes a JSON string holds
// as they are: ASCII, not '"' or '\\' (nor a control character, with
// ctl). The decoder went a byte at a time through a switch; a body or a
// stack trace is long runs of such bytes, checked here 16 at a time.
func plainRun(b []byte, ctl bool) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	look := func(w uint64) uint64 {
		q, bs := w^(ones*'"'), w^(ones*'\\')
		m := w | ((q - ones) & ^q) | ((bs - ones) & ^bs)
		if ctl {
			m |= (w - ones*0x20) & ^w
		}
		return m & highs
	}
	i := 0
	for ; i+16 <= len(b); i += 16 {
		if look(binary.LittleEndian.Uint64(b[i:]))|look(binary.LittleEndian.Uint64(b[i+8:])) != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c >= utf8.RuneSelf || (ctl && c < 0x20) {
			break
		}
	}
	return i
}
