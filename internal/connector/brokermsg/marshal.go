package brokermsg

import (
	"strings"
	"unicode/utf8"
)

// marshalSpecials are the ASCII bytes past control characters that
// json.Marshal escapes.
const marshalSpecials = "\"\\<>&"

// AppendMarshalString appends s as encoding/json's Marshal writes a
// string, byte for byte: besides what AppendString escapes, '<', '>' and
// '&' as \u003c, \u003e and \u0026, U+2028 and U+2029 as \u2028 and
// \u2029, and \b and \f in their short forms. An envelope that was
// json.Marshal's output keeps its bytes when an appender replaces the
// Marshal: a message read again must give the same payload, since the
// ledger tells a changed payload by its hash. FuzzAppendMarshalString
// holds it to json.Marshal.
func AppendMarshalString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	// The next of each byte in marshalSpecials at or past i once looked
	// for (strings.IndexByte, vector code); the words between are
	// checked for control characters and bytes past ASCII only.
	var next [len(marshalSpecials)]int
	for k := range next {
		next[k] = -1
	}
	for i := 0; ; {
		stop := len(s)
		for k := range next {
			if next[k] < i {
				next[k] = len(s)
				if j := strings.IndexByte(s[i:], marshalSpecials[k]); j >= 0 {
					next[k] = i + j
				}
			}
			stop = min(stop, next[k])
		}
		i += ctlOrHighPrefixString(s[i:stop])
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
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
