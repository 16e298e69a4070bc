package brokermsg

import (
	"bytes"
	"strings"

	"github.com/replayctl/replayctl/internal/connector"
)

// The reason codes the broker connectors write for an application's
// exception. They are codes the generic triage taxonomy already knows
// (internal/triage/taxonomy.go builtinTaxonomy), so an entry is classed without any
// rules.yaml; the connector's own word for the failure stays in the
// entry's labels and payload.
const (
	CodeTimeout     = "timeout"                // transient
	CodeUnavailable = "dependency_unavailable" // transient
	CodeParse       = "parse_error"            // poison
	CodeDenied      = "permission_denied"      // governance
)

// ExceptionCodes lists the codes ExceptionCode writes, for a connector's
// Codes().
func ExceptionCodes(where string) []connector.Code {
	return []connector.Code{
		{Code: CodeTimeout, Class: "transient", Where: where + ": java.net.SocketTimeoutException, *TimeoutException"},
		{Code: CodeUnavailable, Class: "transient", Where: where + ": java.net.ConnectException, \"connection refused\""},
		{Code: CodeParse, Class: "poison", Where: where + ": JSON/Avro parse, SerializationException, DeserializationException, MessageConversionException"},
		{Code: CodeDenied, Class: "governance", Where: where + ": authorization / access denied exceptions"},
	}
}

// exceptionRules map a fragment of an exception's class name (lower case)
// to a code. Order matters: the first match wins, so the narrow names come
// before the wide ones ("SocketTimeoutException" is a timeout, not a
// socket error).
var exceptionRules = [...]struct{ frag, code string }{
	{"timeoutexception", CodeTimeout},
	{"sockettimeout", CodeTimeout},
	{"connectexception", CodeUnavailable},
	{"noroutetohost", CodeUnavailable},
	{"accessdenied", CodeDenied},
	{"authorizationexception", CodeDenied},
	{"notauthorized", CodeDenied},
	{"authenticationexception", CodeDenied},
	{"forbidden", CodeDenied},
	{"deserializationexception", CodeParse},
	{"serializationexception", CodeParse},
	{"messageconversionexception", CodeParse},
	{"jsonparseexception", CodeParse},
	{"jsonmappingexception", CodeParse},
	{"jsonprocessingexception", CodeParse},
	{"mismatchedinputexception", CodeParse},
	{"jsonexception", CodeParse},
	{"avro", CodeParse},
	{"numberformatexception", CodeParse},
}

// messageRules map a fragment of an exception's message (lower case).
var messageRules = [...]struct{ frag, code string }{
	{"connection refused", CodeUnavailable},
	{"access denied", CodeDenied},
	{"not authorized", CodeDenied},
	{"unauthorized", CodeDenied},
}

// ExceptionCode maps an application's exception to a reason code: the
// classes (outermost first: a listener's wrapper, then its causes) and a
// stack trace, whose "Caused by:" lines name deeper causes. The deepest
// cause that says something decides: Spring wraps a
// SocketTimeoutException in a ListenerExecutionFailedException, and the
// wrapper says nothing. It returns "" when nothing is recognised: then the
// message alone goes to triage's patterns, and without a match the entry
// stays unrecognised.
func ExceptionCode(classes []string, message, stack string) string {
	all := append([]string(nil), classes...)
	all = append(all, stackClasses(stack)...)
	var buf [256]byte // a class name lower-cased without an allocation
	for i := len(all) - 1; i >= 0; i-- {
		if all[i] == "" {
			continue
		}
		c := appendLower(buf[:0], all[i])
		for _, r := range exceptionRules {
			if bytes.Contains(c, []byte(r.frag)) {
				return r.code
			}
		}
	}
	lower := strings.ToLower(message + "\n" + firstLines(stack, 40))
	for _, r := range messageRules {
		if strings.Contains(lower, r.frag) {
			return r.code
		}
	}
	return ""
}

// appendLower appends s with ASCII upper case lowered (class names are
// ASCII; anything else stays as it is and matches no rule).
func appendLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		dst = append(dst, b)
	}
	return dst
}

// stackClasses returns the exception classes a Java stack trace names: the
// first line's and every "Caused by:" line's, outermost first.
func stackClasses(stack string) []string {
	if stack == "" {
		return nil
	}
	// A scan, not strings.SplitN(stack, "\n", 2000): SplitN allocates
	// room for all 2000 lines up front, 32 KB a message, which was most
	// of a Kafka read's allocation.
	var out []string
	rest := stack
	for i := 0; i < 2000 && rest != ""; i++ {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		line = strings.TrimSpace(line)
		if cause, ok := strings.CutPrefix(line, "Caused by:"); ok {
			out = append(out, className(cause))
		} else if i == 0 {
			out = append(out, className(line))
		}
	}
	return out
}

// className is the "a.b.C" of "a.b.C: message".
func className(s string) string {
	s = strings.TrimSpace(s)
	if c, _, ok := strings.Cut(s, ":"); ok {
		s = c
	}
	if strings.ContainsAny(s, " \t") {
		return "" // not a class name: a sentence
	}
	return s
}

func firstLines(s string, n int) string {
	parts := strings.SplitN(s, "\n", n+1)
	if len(parts) > n {
		parts = parts[:n]
	}
	return strings.Join(parts, "\n")
}

// Excerpt bounds an application's error message kept as an entry's
// Message (the full text stays in the payload envelope).
func Excerpt(s string, max int) string {
	s = strings.TrimSpace(s)
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut-- // not inside a UTF-8 sequence
	}
	return s[:cut] + "…"
}
