package brokermsg

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// appendStringPlain is AppendString as first written (a byte at a time
// past each 8-byte run, AppendBody and AppendBin asking utf8.Valid
// first): the faster appenders must write the same bytes, since a
// re-read message must give the same payload (the ledger tells a changed
// payload by its hash).
func appendStringPlain(dst []byte, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
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
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendBodyPlain(dst, b []byte) []byte {
	if utf8.Valid(b) {
		return appendStringPlain(AppendKey(dst, "body"), b)
	}
	return appendBase64(AppendKey(dst, "body_base64"), b)
}

func appendBinPlain(dst, b []byte) []byte {
	switch {
	case b == nil:
		return append(dst, '{', '}')
	case utf8.Valid(b):
		dst = appendStringPlain(append(dst, `{"text":`...), b)
	default:
		dst = appendBase64(append(dst, `{"base64":`...), b)
	}
	return append(dst, '}')
}

// samePlainBytes checks AppendString, AppendBody and AppendBin against the
// plain appenders, byte for byte, after a prefix and on their own.
func samePlainBytes(t *testing.T, s []byte) {
	t.Helper()
	for _, pre := range [][]byte{nil, []byte("{"), []byte(`{"a":1`)} {
		for _, c := range []struct {
			name      string
			got, want []byte
		}{
			{"AppendString", AppendString(bytes.Clone(pre), s), appendStringPlain(bytes.Clone(pre), s)},
			{"AppendString(string)", AppendString(bytes.Clone(pre), string(s)), appendStringPlain(bytes.Clone(pre), s)},
			{"AppendBody", AppendBody(bytes.Clone(pre), s), appendBodyPlain(bytes.Clone(pre), s)},
			{"AppendBin", AppendBin(bytes.Clone(pre), s), appendBinPlain(bytes.Clone(pre), s)},
		} {
			if !bytes.Equal(c.got, c.want) {
				t.Fatalf("%s(%q, %q) = %q, first written as %q", c.name, pre, s, c.got, c.want)
			}
		}
	}
}

func TestAppendersWriteThePlainBytes(t *testing.T) {
	for _, s := range []string{"", "plain", "exactly8", "sixteen bytes ok", "seventeen bytes ok", strings.Repeat("x", 900),
		"tab\tnew\nline\rcr\x00nul\x1funit\x7fdel", "é ü 日本語 and more text after", "bad \xff byte", "\xc3", "cut \xe6\x97 off",
		"\xf0\x9f\x98\x80 emoji", strings.Repeat("\tat com.acme.Foo.bar(Foo.java:1)\n", 40), strings.Repeat("ok ", 20) + "\xff"} {
		samePlainBytes(t, []byte(s))
	}
	samePlainBytes(t, nil)
	// Quotes, backslashes, control characters and runes past ASCII mixed
	// at random over runs of every length: appendText looks for '"' and
	// '\\' again only once it passed the last one it found.
	rng := rand.New(rand.NewPCG(28, 1))
	parts := []string{"\"", "\\", "\n", "\x01", "é", "日本", "\xff", "\xe6\x97", "a", "xxxxxxxxxxxxxxxxxxxx", strings.Repeat("y", 70)}
	for range 3000 {
		var s []byte
		for range rng.IntN(12) {
			s = append(s, parts[rng.IntN(len(parts))]...)
		}
		samePlainBytes(t, s)
	}
	// Every byte at every position of a 32-byte string: each lane of the
	// 16-byte step, the 8-byte step and the byte tail.
	for b := 0; b < 256; b++ {
		for pos := 0; pos < 32; pos++ {
			s := []byte("abcdefghijklmnopqrstuvwxyz012345")
			s[pos] = byte(b)
			samePlainBytes(t, s)
			samePlainBytes(t, s[:pos+1])
		}
	}
}

func FuzzAppendersWriteThePlainBytes(f *testing.F) {
	for _, s := range []string{"", "x\"y", "\xff\xfe", "日本\n", strings.Repeat("a", 40) + "\x01"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) { samePlainBytes(t, s) })
}
