package jsonl

import (
	"encoding/binary"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
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
		if is(name, "id") {
			return fID
		}
	case 5:
		if is(name, "topic") {
			return fTopic
		}
	case 6:
		if is(name, "labels") {
			return fLabels
		}
	case 7:
		if is(name, "message") {
			return fMessage
		}
		if is(name, "payload") {
			return fPayload
		}
	case 8:
		if is(name, "attempts") {
			return fAttempts
		}
	case 11:
		if is(name, "reason_code") {
			return fReason
		}
	case 12:
		if is(name, "last_failure") {
			return fLast
		}
		if is(name, "source_state") {
			return fState
		}
	case 13:
		if is(name, "first_failure") {
			return fFirst
		}
	case 15:
		if is(name, "idempotency_key") {
			return fKey
		}
	}
	return -1
}

// is matches name to a lower-case field name ignoring ASCII case.
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

// span is a JSON string's contents (or a raw value) in the line; esc when
// unquote must rewrite it (an escape, a non-ASCII byte).
type span struct {
	start, end int
	esc        bool
}

// labelSpan is one member of labels.
type labelSpan struct{ key, val span }

// decodeFast is the fast path of decodeJSONL: ok false means "use the
// strict decoder", and then *e is untouched.
func decodeFast(raw []byte, e *entry.Entry) (ok bool) {
	d := scanner{d: raw}
	var (
		text     [nText]span
		attempts int
		payload  span
		lbuf     [8]labelSpan
		labels   = lbuf[:0]
		seen     uint16
	)
	d.ws()
	if !d.lit('{') {
		return false
	}
	d.ws()
	if !d.lit('}') {
		for {
			var name span
			if !d.str(&name) || name.esc {
				return false
			}
			f := fieldOf(raw[name.start:name.end])
			if f < 0 || seen&(1<<f) != 0 {
				return false // unknown (an error) or a duplicate (merged)
			}
			seen |= 1 << f
			d.ws()
			if !d.lit(':') {
				return false
			}
			d.ws()
			switch {
			case d.peek() == 'n':
				// null leaves each field at its zero
				if !d.word("null") {
					return false
				}
			case f < nText:
				if !d.str(&text[f]) {
					return false
				}
			case f == fAttempts:
				if attempts, ok = d.int(); !ok {
					return false
				}
			case f == fLabels:
				if labels, ok = d.labels(labels); !ok {
					return false
				}
			default: // fPayload
				payload.start = d.i
				if !d.skip(0) {
					return false
				}
				payload.end = d.i
			}
			d.ws()
			if d.lit('}') {
				break
			}
			if !d.lit(',') {
				return false
			}
			d.ws()
		}
	}
	d.ws()
	if d.i != len(raw) || text[fID].end == text[fID].start {
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
	if p := raw[payload.start:payload.end]; records.Present(p) {
		r.Payload = append([]byte(nil), p...)
	}
	r.FirstFailure, r.LastFailure = records.OrBoth(times[0], times[1])
	*e = r
	return true
}

// scanner walks a line, checking it as encoding/json's scanner does.
type scanner struct {
	d []byte
	i int
}

// maxDepth bounds skip's recursion; a deeper payload goes to the strict
// decoder (encoding/json allows 10000).
const maxDepth = 200

func (d *scanner) peek() byte {
	if d.i < len(d.d) {
		return d.d[d.i]
	}
	return 0
}

func (d *scanner) ws() {
	for d.i < len(d.d) {
		switch d.d[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *scanner) lit(c byte) bool {
	if d.i < len(d.d) && d.d[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *scanner) word(w string) bool {
	if len(d.d)-d.i >= len(w) && string(d.d[d.i:d.i+len(w)]) == w {
		d.i += len(w)
		return true
	}
	return false
}

// str reads a JSON string into s.
func (d *scanner) str(s *span) bool {
	if !d.lit('"') {
		return false
	}
	s.start, s.esc = d.i, false
	for d.i < len(d.d) {
		d.i += plainRun(d.d[d.i:], true)
		if d.i >= len(d.d) {
			break
		}
		switch c := d.d[d.i]; {
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
		default: // non-ASCII: may be invalid UTF-8, which unquote replaces
			s.esc = true
			d.i++
		}
	}
	return false
}

// int reads a number encoding/json stores in an int: an integer literal,
// no fraction or exponent, of up to 18 digits (a longer one may overflow;
// the strict decoder decides).
func (d *scanner) int() (int, bool) {
	neg := d.lit('-')
	start := d.i
	var n int
	for d.i < len(d.d) && '0' <= d.d[d.i] && d.d[d.i] <= '9' {
		n = n*10 + int(d.d[d.i]-'0')
		d.i++
	}
	digits := d.i - start
	if digits == 0 || digits > 18 || (digits > 1 && d.d[start] == '0') {
		return 0, false
	}
	if c := d.peek(); c == '.' || c == 'e' || c == 'E' {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// labels reads an object of strings.
func (d *scanner) labels(l []labelSpan) ([]labelSpan, bool) {
	if !d.lit('{') {
		return l, false
	}
	d.ws()
	if d.lit('}') {
		return l, true
	}
	for {
		var kv labelSpan
		if !d.str(&kv.key) {
			return l, false
		}
		d.ws()
		if !d.lit(':') {
			return l, false
		}
		d.ws()
		if !d.str(&kv.val) { // null too: the strict decoder decides
			return l, false
		}
		l = append(l, kv)
		d.ws()
		if d.lit('}') {
			return l, true
		}
		if !d.lit(',') {
			return l, false
		}
		d.ws()
	}
}

// skip reads any JSON value.
func (d *scanner) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch c := d.peek(); {
	case c == '"':
		var s span
		return d.str(&s)
	case c == '{' || c == '[':
		d.i++
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		d.ws()
		if d.lit(end) {
			return true
		}
		for {
			if c == '{' {
				var s span
				if !d.str(&s) {
					return false
				}
				d.ws()
				if !d.lit(':') {
					return false
				}
				d.ws()
			}
			if !d.skip(depth + 1) {
				return false
			}
			d.ws()
			if d.lit(end) {
				return true
			}
			if !d.lit(',') {
				return false
			}
			d.ws()
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

// number reads a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *scanner) number() bool {
	d.lit('-')
	switch c := d.peek(); {
	case c == '0':
		d.i++
	case '1' <= c && c <= '9':
		d.digits()
	default:
		return false
	}
	if d.lit('.') && !d.digits() {
		return false
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

func (d *scanner) digits() bool {
	start := d.i
	for d.i < len(d.d) && '0' <= d.d[d.i] && d.d[d.i] <= '9' {
		d.i++
	}
	return d.i > start
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

// str is s's contents as a string of its own (as encoding/json gives
// each: one kept alone, an id in a map, keeps no more of the line alive).
func str(raw []byte, s span) string {
	if !s.esc {
		return string(raw[s.start:s.end])
	}
	var sb strings.Builder
	sb.Grow(s.end - s.start)
	unquote(&sb, raw[s.start:s.end], true)
	return sb.String()
}

// unquote writes a checked JSON string's contents as encoding/json
// decodes them: escapes resolved, a surrogate pair joined, a lone
// surrogate and each byte of invalid UTF-8 as U+FFFD. Without esc they
// are s as it is.
func unquote(sb *strings.Builder, s []byte, esc bool) {
	if !esc {
		sb.Write(s)
		return
	}
	for r := 0; r < len(s); {
		if n := plainRun(s[r:], false); n > 0 {
			sb.Write(s[r : r+n])
			if r += n; r >= len(s) {
				break
			}
		}
		switch c := s[r]; {
		case c == '\\':
			switch e := s[r+1]; e {
			case 'b':
				sb.WriteByte('\b')
			case 'f':
				sb.WriteByte('\f')
			case 'n':
				sb.WriteByte('\n')
			case 'r':
				sb.WriteByte('\r')
			case 't':
				sb.WriteByte('\t')
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
						sb.WriteRune(dec)
						continue
					}
					rr = unicode.ReplacementChar
				}
				sb.WriteRune(rr)
				continue
			default: // '"', '\\', '/'
				sb.WriteByte(e)
			}
			r += 2
		case c < utf8.RuneSelf:
			sb.WriteByte(c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			if rr == utf8.RuneError && size == 1 {
				sb.WriteRune(unicode.ReplacementChar)
			} else {
				sb.Write(s[r : r+size])
			}
			r += size
		}
	}
}

// plainRun is the length of b's leading run of bytes a JSON string holds
// as they are: ASCII, not '"' or '\\' (nor a control character, with
// ctl), checked 16 at a time (a payload is mostly long strings).
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
