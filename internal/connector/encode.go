package connector

import "strings"

// EncodingHeader names, on an HTTP replay, the encoding of the
// Idempotency-Key and X-Replay-Entry-Id values when one of them had to
// be encoded; an exec target gets the same in REPLAY_ENCODING.
const EncodingHeader = "X-Replay-Encoding"

// PercentEncoding is the one encoding used (see Encode).
const PercentEncoding = "percent"

// Encode returns s unchanged when it can travel as an HTTP header value
// or an environment variable byte for byte: printable ASCII (0x20-0x7e),
// no space at either end. Otherwise (a control character, NUL, a byte
// of UTF-8 or invalid UTF-8, an edge space) it returns s percent-encoded
// (every byte outside 0x21-0x7e, and '%' itself, as %XX) and true, so
// that such an entry is still sent, never stuck: net/http refuses a
// control character in a header and exec refuses NUL in the environment.
// Keys that were sendable keep their exact bytes.
func Encode(s string) (string, bool) {
	if sendable(s) {
		return s, false
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c > 0x20 && c < 0x7f && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String(), true
}

// HeaderValue is Encode without the flag, for a value whose encoding the
// receiver does not need to be told (a probe's lookup of its own key).
func HeaderValue(s string) string {
	v, _ := Encode(s)
	return v
}

func sendable(s string) bool {
	if s == "" {
		return true
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
