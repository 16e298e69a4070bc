package replay

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// outcomeDetail is the outcome record's detail: the JSON object
// encoding/json makes of {"target", "attempt", "status", and when set
// "new_job_id" and "next_attempt_at"} (keys sorted, strings escaped as
// it escapes them), built without a map or reflection: it is made once
// per dispatch.
func outcomeDetail(target string, attempt, status int, newJobID string, due time.Time) []byte {
	b := make([]byte, 0, 64+len(target)+len(newJobID))
	b = append(b, `{"attempt":`...)
	b = strconv.AppendInt(b, int64(attempt), 10)
	if newJobID != "" {
		b = append(b, `,"new_job_id":`...)
		b = appendJSONString(b, newJobID)
	}
	if !due.IsZero() {
		if y := due.Year(); y < 0 || y > 9999 {
			return nil // encoding/json refuses it: no detail, as before
		}
		b = append(b, `,"next_attempt_at":"`...)
		b = due.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"target":`...)
	b = appendJSONString(b, target)
	return append(b, '}')
}

// appendJSONString appends s as encoding/json writes a string: <, > and
// & escaped for HTML, control characters as \b \f \n \r \t or \u00XX,
// invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
