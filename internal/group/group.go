package group

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/replayctl/replayctl/internal/entry"
)

// Key is what makes two failures the same failure.
type Key struct {
	Source string `json:"source"`
	Topic  string `json:"topic"`
	Class  string `json:"class"`
	// Error is the source's own signature when it has one (Prodigy's
	// error_signature), else the reason code and the normalised message.
	Error string `json:"error"`
}

// Options configure the signature (rules.yaml `groups:`).
type Options struct {
	// StackFrames is how many top frames of a stack join the error
	// (default 3; negative: none).
	StackFrames int
	// IgnoreTopic leaves the topic out (one group per cause across topics).
	IgnoreTopic bool
}

// Default is the signature without configuration.
var Default = Options{}

func (o Options) frames() int {
	switch {
	case o.StackFrames < 0:
		return 0
	case o.StackFrames == 0:
		return 3
	}
	return o.StackFrames
}

// maxLine bounds what of one line is normalised: a 1 MB message costs what
// a short one does.
const maxLine = 240

// Of is the group key of e classified as class.
//
// Every string is read as JSON stores it (each invalid UTF-8 byte a
// U+FFFD), so an entry's group is the same computed from the record in
// memory or from its stored JSON.
func (o Options) Of(e *entry.Entry, class string) Key {
	k := Key{Source: valid(e.Source), Topic: valid(e.Topic), Class: valid(class)}
	if o.IgnoreTopic {
		k.Topic = ""
	}
	var stack [256]byte
	k.Error = string(o.appendError(stack[:0], e))
	return k
}

// appendError appends the error part of e's signature to dst.
func (o Options) appendError(dst []byte, e *entry.Entry) []byte {
	switch {
	case e.DecodeError != "":
		dst = append(dst, "undecodable: "...)
		return appendNormalised(dst, firstLine(valid(e.DecodeError)))
	case e.State.ErrorSignature != "":
		return append(dst, valid(e.State.ErrorSignature)...)
	}
	code := strings.TrimSpace(valid(e.ReasonCode))
	if code == "" {
		code = "-"
	}
	dst = appendLower(dst, code)
	dst = append(dst, ": "...)
	return appendMessage(dst, valid(e.Message), o.frames())
}

// Of is Default.Of.
func Of(e *entry.Entry, class string) Key { return Default.Of(e, class) }

// IDOf is o.Of(e, class).ID() without building the key: what the store
// computes on every entry write (BenchmarkGroupAssignment).
func (o Options) IDOf(e *entry.Entry, class string) string {
	var stack [256]byte
	errb := o.appendError(stack[:0], e)
	topic := e.Topic
	if o.IgnoreTopic {
		topic = ""
	}
	h := fnvValid(fnvOffset, e.Source) * fnvPrime
	h = fnvValid(h, topic) * fnvPrime
	h = fnvValid(h, class) * fnvPrime
	for _, c := range errb {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return idString(h * fnvPrime)
}

// IDOf is Default.IDOf.
func IDOf(e *entry.Entry, class string) string { return Default.IDOf(e, class) }

// FNV-1a, 64 bits.
const fnvOffset, fnvPrime = 14695981039346656037, 1099511628211

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

// fnvValid is fnvString(h, valid(s)), checking s as it hashes: an ASCII
// string (nearly every source, topic and class) is read once.
func fnvValid(h uint64, s string) uint64 {
	h0 := h
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return fnvString(h0, valid(s))
		}
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

// ID names the group: "g" and 11 hex digits (44 bits) of the key's
// FNV-1a hash (each field followed by a zero byte), short enough to type,
// stable across processes and stores. Not a cryptographic hash: the store
// computes it on every entry write (sha256 was 40% of the assignment),
// and a group id only has to tell apart a DLQ's few thousand causes.
func (k Key) ID() string {
	h := uint64(fnvOffset)
	for _, s := range [...]string{k.Source, k.Topic, k.Class, k.Error} {
		h = fnvString(h, s) * fnvPrime // the separator (a zero byte)
	}
	return idString(h)
}

func idString(h uint64) string {
	const digits = "0123456789abcdef"
	var id [12]byte
	id[0] = 'g'
	for i := 11; i >= 1; i-- {
		id[i] = digits[h&0xf]
		h >>= 4
	}
	return string(id[:])
}

// IsID reports whether s looks like a group id.
func IsID(s string) bool {
	if len(s) != 12 || s[0] != 'g' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isHex(s[i]) || s[i] >= 'A' && s[i] <= 'F' {
			return false
		}
	}
	return true
}

func firstLine(s string) string {
	// Two IndexByte scans: IndexAny builds a set on every call (a tenth
	// of the assignment, BenchmarkGroupCorpus).
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if i := strings.IndexByte(s, '\r'); i >= 0 {
		s = s[:i]
	}
	return s
}

// appendMessage appends the normalised first line of msg and its first
// frames lines that look like a stack frame.
func appendMessage(dst []byte, msg string, frames int) []byte {
	msg = strings.TrimSpace(msg)
	first := firstLine(msg)
	dst = appendNormalised(dst, first)
	if frames == 0 || len(first) == len(msg) || strings.IndexByte(msg, '\n') < 0 {
		return dst
	}
	n := 0
	rest := msg[len(first):]
	for rest != "" && n < frames {
		rest = strings.TrimLeft(rest, "\r\n")
		line := firstLine(rest)
		rest = rest[len(line):]
		if t := strings.TrimSpace(line); isFrame(t) {
			dst = append(dst, " | "...)
			dst = appendNormalised(dst, t)
			n++
		}
	}
	return dst
}

// appendLower appends s in lower case (ASCII).
func appendLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// isFrame recognises a stack frame line: Java/JS/.NET "at ...", Python
// `File "x.py", line 3`, Go "pkg.Func(...)" followed by "file.go:12".
func isFrame(l string) bool {
	switch {
	case strings.HasPrefix(l, "at "), strings.HasPrefix(l, "File \""):
		return true
	case strings.Contains(l, ".go:"), strings.Contains(l, ".py:"), strings.Contains(l, ".java:"),
		strings.Contains(l, ".js:"), strings.Contains(l, ".ts:"), strings.Contains(l, ".rb:"):
		return true
	}
	return false
}

// Normalise masks what varies between two occurrences of one failure in a
// line: a quoted value becomes '?', a word with a digit (a number, an id,
// a hex string, a UUID or timestamp part) becomes #, so does a run of 8
// or more hex letters; a run of # joined by - : . / + becomes one #.
// Case is folded and blanks are collapsed.
func Normalise(s string) string {
	return string(appendNormalised(nil, s))
}

// appendNormalised appends Normalise(s) to dst.
func appendNormalised(dst []byte, s string) []byte {
	if len(s) > maxLine {
		n := maxLine
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	start := len(dst)
	out := dst
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case (c == '"' || c == '\'' || c == '`') && (i == 0 || !isWord(s[i-1]) && s[i-1] != '#'):
			if j := strings.IndexByte(s[i+1:], c); j >= 0 {
				out = append(out, '\'', '?', '\'')
				i += j + 2
				continue
			}
			i++ // an unmatched quote is dropped: what follows it varies
		case charClass[c]&cWord != 0:
			// One table lookup a byte: the word's classes OR-ed and
			// AND-ed (the assignment's hot loop, BenchmarkGroupCorpus).
			j, some, every := i, byte(0), byte(cHex)
			for j < len(s) {
				k := charClass[s[j]]
				if k&cWord == 0 {
					break
				}
				some |= k
				every &= k
				j++
			}
			switch {
			case some&cDigit != 0 || every&cHex != 0 && j-i >= 8:
				out = appendMask(out, start)
			case some&cUpper == 0:
				out = append(out, s[i:j]...)
			default:
				out = appendLower(out, s[i:j])
			}
			i = j
		case c == ' ' || c == '\t':
			if len(out) > start && out[len(out)-1] != ' ' {
				out = append(out, ' ')
			}
			i++
		default:
			out = append(out, c)
			i++
		}
	}
	res := bytes.TrimSpace(out[start:])
	return append(out[:start], res...)
}

// appendMask appends #, or folds it into a mask just before it that only
// joiners separate from it ("2026-11-27T07:30:00Z" is one #).
func appendMask(out []byte, start int) []byte {
	j := len(out)
	for j > start && isJoiner(out[j-1]) {
		j--
	}
	if j > start && out[j-1] == '#' {
		return out[:j]
	}
	return append(out, '#')
}

// Byte classes of appendNormalised's words.
const (
	cWord = 1 << iota
	cDigit
	cHex
	cUpper
)

var charClass = func() (t [256]byte) {
	for c := range 256 {
		b := byte(c)
		if isWord(b) {
			t[c] |= cWord
		}
		if b >= '0' && b <= '9' {
			t[c] |= cDigit
		}
		if isHex(b) {
			t[c] |= cHex
		}
		if b >= 'A' && b <= 'Z' {
			t[c] |= cUpper
		}
	}
	return t
}()

func isJoiner(c byte) bool {
	return c == '-' || c == ':' || c == '.' || c == '/' || c == '+'
}

func isWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// valid is s as encoding/json decodes what it encoded: each byte of an
// invalid UTF-8 sequence becomes U+FFFD.
func valid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
