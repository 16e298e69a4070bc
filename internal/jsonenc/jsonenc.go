// Package jsonenc appends JSON strings exactly as encoding/json writes
// them, for the hand-written appenders that replace json.Marshal on hot
// paths (audit records, stored entries, broker envelopes, outcome
// details). One implementation, held to json.Marshal by the fuzz targets
// of its callers (audit's FuzzPrepareMatchesMarshal, brokermsg's
// FuzzAppendMarshalString) and by TestAppendStringIsMarshal here.
package jsonenc

import "unicode/utf8"

// AppendString appends s as encoding/json's Marshal writes a string,
// byte for byte: '<', '>' and '&' escaped for HTML, control characters
// as \b \f \n \r \t or \u00XX, U+2028 and U+2029 escaped, an invalid
// UTF-8 byte as \ufffd (encoding/json's appendString with escapeHTML).
// Records and payload envelopes that were json.Marshal's output keep
// their bytes when an appender replaces the Marshal: the audit chain
// hashes them, and the ledger tells a changed payload by its hash.
func AppendString(dst []byte, s string) []byte {
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
