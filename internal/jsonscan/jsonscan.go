// Package jsonscan is the one-pass JSON reading that replayctl's
// hand-written decoders share (the Kafka envelope a replay reads back,
// a JSONL line): a Scanner that checks what it reads as encoding/json's
// scanner does, and AppendUnquote, which decodes a string's contents as
// encoding/json does. The decoders give up on whatever they are not sure
// of and hand it to encoding/json, which then gives the same result or
// the same error.
package jsonscan

import (
	"encoding/binary"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds Skip's nesting; a deeper value is left to
// encoding/json (which allows 10000).
const MaxDepth = 200

// Span is a JSON string's contents (or a raw value) in the input: [Start,
// End). Set once read; Esc when it holds a backslash escape, a non-ASCII
// byte (which may be invalid UTF-8) or anything else AppendUnquote must
// rewrite.
type Span struct {
	Start, End int
	Set, Esc   bool
}

// Scanner reads D from I.
type Scanner struct {
	D []byte
	I int
}

// Peek is the byte at I, 0 at the end.
func (d *Scanner) Peek() byte {
	if d.I < len(d.D) {
		return d.D[d.I]
	}
	return 0
}

// WS skips JSON white space.
func (d *Scanner) WS() {
	for d.I < len(d.D) {
		switch d.D[d.I] {
		case ' ', '\t', '\n', '\r':
			d.I++
		default:
			return
		}
	}
}

// Lit reads c if it is next.
func (d *Scanner) Lit(c byte) bool {
	if d.I < len(d.D) && d.D[d.I] == c {
		d.I++
		return true
	}
	return false
}

// Word reads w if it is next.
func (d *Scanner) Word(w string) bool {
	if len(d.D)-d.I >= len(w) && string(d.D[d.I:d.I+len(w)]) == w {
		d.I += len(w)
		return true
	}
	return false
}

// Str reads a JSON string into s.
func (d *Scanner) Str(s *Span) bool {
	if !d.Lit('"') {
		return false
	}
	s.Start, s.Set, s.Esc = d.I, true, false
	for d.I < len(d.D) {
		d.I += PlainRun(d.D[d.I:], true)
		if d.I >= len(d.D) {
			break
		}
		switch c := d.D[d.I]; {
		case c == '"':
			s.End = d.I
			d.I++
			return true
		case c == '\\':
			s.Esc = true
			if d.I+1 >= len(d.D) {
				return false
			}
			switch d.D[d.I+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.I += 2
			case 'u':
				if d.I+6 > len(d.D) || Hex4(d.D[d.I+2:d.I+6]) < 0 {
					return false
				}
				d.I += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		default: // non-ASCII: may be invalid UTF-8, which AppendUnquote replaces
			s.Esc = true
			d.I++
		}
	}
	return false
}

// Number reads a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *Scanner) Number() bool {
	d.Lit('-')
	switch c := d.Peek(); {
	case c == '0':
		d.I++
	case '1' <= c && c <= '9':
		d.Digits()
	default:
		return false
	}
	if d.Lit('.') && !d.Digits() {
		return false
	}
	if c := d.Peek(); c == 'e' || c == 'E' {
		d.I++
		if c := d.Peek(); c == '+' || c == '-' {
			d.I++
		}
		if !d.Digits() {
			return false
		}
	}
	return true
}

// Digits reads [0-9]* and reports whether there was one.
func (d *Scanner) Digits() bool {
	start := d.I
	for d.I < len(d.D) && '0' <= d.D[d.I] && d.D[d.I] <= '9' {
		d.I++
	}
	return d.I > start
}

// Skip reads any JSON value nested depth deep (0 at the top); past
// MaxDepth it gives up.
func (d *Scanner) Skip(depth int) bool {
	if depth > MaxDepth {
		return false
	}
	switch c := d.Peek(); {
	case c == '"':
		var s Span
		return d.Str(&s)
	case c == '{':
		return d.Members(func(Span) bool { return d.Skip(depth + 1) })
	case c == '[':
		d.I++
		d.WS()
		if d.Lit(']') {
			return true
		}
		for {
			if !d.Skip(depth + 1) {
				return false
			}
			d.WS()
			if d.Lit(']') {
				return true
			}
			if !d.Lit(',') {
				return false
			}
			d.WS()
		}
	case c == 't':
		return d.Word("true")
	case c == 'f':
		return d.Word("false")
	case c == 'n':
		return d.Word("null")
	default:
		return d.Number()
	}
}

// Members reads a JSON object, calling field with each member's name and
// the scanner at the member's value, which field reads.
func (d *Scanner) Members(field func(name Span) bool) bool {
	if !d.Lit('{') {
		return false
	}
	d.WS()
	if d.Lit('}') {
		return true
	}
	for {
		var s Span
		if !d.Str(&s) {
			return false
		}
		d.WS()
		if !d.Lit(':') {
			return false
		}
		d.WS()
		if !field(s) {
			return false
		}
		d.WS()
		if d.Lit('}') {
			return true
		}
		if !d.Lit(',') {
			return false
		}
		d.WS()
	}
}

// IsField matches a member's name with a field as encoding/json does for
// an ASCII name: exactly or ignoring ASCII case. (encoding/json also
// folds some non-ASCII letters, 'ſ' to 's': a decoder gives up on a name
// that is not plain ASCII.)
func IsField(name []byte, field string) bool {
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

// Hex4 is the value of four hex digits, -1 if one is not.
func Hex4(b []byte) rune {
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

// AppendUnquote appends the contents of a string Str checked as
// encoding/json decodes them: escapes resolved, a surrogate pair joined,
// a lone surrogate and each byte of invalid UTF-8 as U+FFFD.
func AppendUnquote(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		if n := PlainRun(s[r:], false); n > 0 {
			dst = append(dst, s[r:r+n]...)
			if r += n; r >= len(s) {
				break
			}
		}
		switch c := s[r]; {
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
				rr := Hex4(s[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					rr1 := rune(-1)
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						rr1 = Hex4(s[r+2:])
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

// PlainRun is the length of b's leading run of bytes a JSON string holds
// as they are: ASCII, not '"' or '\\' (nor a control character, with
// ctl), checked 16 at a time (a payload or a stack trace is mostly long
// runs of them).
func PlainRun(b []byte, ctl bool) int {
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
