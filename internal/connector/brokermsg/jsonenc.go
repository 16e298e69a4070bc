package brokermsg

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"time"
	"unicode/utf8"
)

// The appenders below write an envelope's JSON by hand. A read converts
// every message it takes; encoding/json spent most of a Kafka read's time
// on reflection and copies (the bench's Kafka read was 0.1-0.2x of the
// bare client's, with 2000 records taking 20-35 ms to convert on the
// shared 2-core machine against 3 ms to fetch). The output decodes with
// encoding/json to the same values as json.Marshal's (the tests check
// this against json.Marshal for awkward input): strings escape ", \ and
// control characters, and an invalid UTF-8 byte becomes U+FFFD as
// encoding/json writes it.

// AppendString appends s as a JSON string.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst, _ = appendString(dst, s, false)
	return dst
}

// appendString appends s as a JSON string. With strict it stops at the
// first invalid UTF-8 byte and reports false (dst then holds a partial
// string): AppendBody and AppendBin learn in the same pass whether the
// bytes are text, where they used to run utf8.Valid over them first.
func appendString[S ~string | ~[]byte](dst []byte, s S, strict bool) ([]byte, bool) {
	dst = append(dst, '"')
	start := 0
	for i := 0; ; {
		i += plainPrefix(s[i:])
		if i >= len(s) {
			break
		}
		b := s[i]
		if b < utf8.RuneSelf {
			dst = appendEscape(append(dst, s[start:i]...), b)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			if strict {
				return dst, false
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), true
}

// appendEscape appends the escape of b, an ASCII byte a JSON string
// cannot hold as it is.
func appendEscape(dst []byte, b byte) []byte {
	const hex = "0123456789abcdef"
	switch b {
	case '"', '\\':
		return append(dst, '\\', b)
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
}

// appendText is appendString for a message's bytes (a body, a header
// value: the long strings of an envelope), the same bytes out, in fewer
// steps a byte: '"' and '\\' are found by bytes.IndexByte (the runtime's
// vector code; each is looked for again only once passed) and the word
// loop between them checks only for control characters and bytes past
// ASCII, three operations a word where plainPrefix takes twelve.
func appendText(dst []byte, s []byte, strict bool) ([]byte, bool) {
	dst = append(dst, '"')
	start := 0
	nextQuote, nextBackslash := -1, -1 // at or past i once looked for; len(s) when none
	for i := 0; ; {
		if nextQuote < i {
			nextQuote = nextByte(s, i, '"')
		}
		if nextBackslash < i {
			nextBackslash = nextByte(s, i, '\\')
		}
		i += ctlOrHighPrefix(s[i:min(nextQuote, nextBackslash)])
		if i >= len(s) {
			break
		}
		b := s[i]
		if b < utf8.RuneSelf {
			dst = appendEscape(append(dst, s[start:i]...), b)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			if strict {
				return dst, false
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), true
}

// nextByte is the index of the first c in s at or past i, len(s) when
// there is none.
func nextByte(s []byte, i int, c byte) int {
	if j := bytes.IndexByte(s[i:], c); j >= 0 {
		return i + j
	}
	return len(s)
}

// ctlOrHighPrefix is the length of s's leading run of bytes that are
// neither control characters nor past ASCII.
func ctlOrHighPrefix(s []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	// A byte below 0x20 sets its high bit in w-0x20 (and may set the
	// next one's, past a byte that is marked anyway). Thirty-two bytes a
	// step, each step's slice checked once, then a word at a time up to
	// the marked word: a body is mostly long runs.
	for ; len(s)-i >= 32; i += 32 {
		w := s[i : i+32 : i+32]
		a, b := binary.LittleEndian.Uint64(w), binary.LittleEndian.Uint64(w[8:])
		c, d := binary.LittleEndian.Uint64(w[16:]), binary.LittleEndian.Uint64(w[24:])
		if (a|(a-ones*0x20)|b|(b-ones*0x20)|c|(c-ones*0x20)|d|(d-ones*0x20))&highs != 0 {
			break
		}
	}
	for ; len(s)-i >= 8; i += 8 {
		if a := binary.LittleEndian.Uint64(s[i:]); (a|(a-ones*0x20))&highs != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b >= utf8.RuneSelf {
			break
		}
	}
	return i
}

// plainPrefix is the length of s's leading run of bytes that a JSON
// string holds as they are: ASCII, not a control character, '"' or '\\'.
// Sixteen bytes a step while none needs a look: most bodies and stack
// traces are long runs of plain ASCII text.
func plainPrefix[S ~string | ~[]byte](s S) int {
	i := 0
	for ; i+16 <= len(s); i += 16 {
		if needsLook(load64(s, i))|needsLook(load64(s, i+8)) != 0 {
			break
		}
	}
	for ; i+8 <= len(s); i += 8 {
		if needsLook(load64(s, i)) != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b == '"' || b == '\\' || b >= utf8.RuneSelf {
			break
		}
	}
	return i
}

// load64 is s[i:i+8] little-endian (the compiler makes it one load).
func load64[S ~string | ~[]byte](s S, i int) uint64 {
	w := s[i : i+8]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// needsLook is non-zero when one of the eight bytes in w is a control
// character, '"', '\\' or past ASCII (the bit tricks of "Bit Twiddling
// Hacks", "determine if a word has a byte less than n"; a byte past ASCII
// may make a false mark in its neighbours, and is marked itself anyway).
func needsLook(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	ctl := (w - ones*0x20) & ^w
	q := w ^ (ones * '"')
	bs := w ^ (ones * '\\')
	return (w | ctl | ((q - ones) & ^q) | ((bs - ones) & ^bs)) & highs
}

// AppendKey appends "name": (name needs no escaping) after a comma unless
// dst ends an object's opening brace.
func AppendKey(dst []byte, name string) []byte {
	if n := len(dst); n > 0 && dst[n-1] != '{' {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

// AppendBody appends a Body's fields (body or body_base64) for b, as
// NewBody(b) marshals inside an object.
func AppendBody(dst []byte, b []byte) []byte {
	n := len(dst)
	out, ok := appendText(AppendKey(dst, "body"), b, true)
	if ok {
		return out
	}
	// Not UTF-8: base64, from where the key began.
	return appendBase64(AppendKey(out[:n], "body_base64"), b)
}

// AppendBin appends NewBin(b) as a JSON object.
func AppendBin(dst []byte, b []byte) []byte {
	if b == nil {
		return append(dst, '{', '}')
	}
	n := len(dst)
	out, ok := appendText(append(dst, `{"text":`...), b, true)
	if !ok {
		out = appendBase64(append(out[:n], `{"base64":`...), b) // not UTF-8
	}
	return append(out, '}')
}

func appendBase64(dst []byte, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// AppendInt appends n.
func AppendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

// AppendTime appends t as time.Time's MarshalJSON does.
func AppendTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}
