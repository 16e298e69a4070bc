package server

import (
	"bytes"
	"encoding/json"
	"strings"
)

// cardPayloadCap bounds the payload an approvals card shows.
const cardPayloadCap = 4096

// payloadPreview is the first limit bytes of the payload as prettyPayload
// shows it (indented when it is JSON of at most 4*payloadCap bytes, else
// as it is): a card shows 4 KB, so only the bytes that make them are
// indented, not the whole payload (up to 256 KB) before cutting.
func payloadPreview(raw []byte, limit int) (string, bool) {
	out, cut := raw, len(raw) > limit
	if len(raw) <= 4*payloadCap && json.Valid(raw) {
		out, cut = indentPrefix(raw, limit)
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return strings.ToValidUTF8(string(out), ""), cut
}

// indentPrefix indents valid JSON as json.Indent(dst, src, "", "  ") does
// (but drops trailing whitespace), stopping once limit bytes are written;
// cut says whether anything was left.
func indentPrefix(src []byte, limit int) ([]byte, bool) {
	out := make([]byte, 0, min(limit, 2*len(src))+1)
	depth, needIndent, inString, escaped := 0, false, false, false
	newline := func() {
		out = append(out, '\n')
		for range depth {
			out = append(out, ' ', ' ')
		}
	}
	for i, c := range src {
		if len(out) >= limit {
			// Anything left but whitespace is cut.
			return out, len(out) > limit || len(bytes.TrimLeft(src[i:], " \t\r\n")) > 0
		}
		if inString {
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		if needIndent && c != '}' && c != ']' {
			needIndent = false
			depth++
			newline()
		}
		switch c {
		case '"':
			inString = true
			out = append(out, c)
		case '{', '[':
			needIndent = true
			out = append(out, c)
		case ',':
			out = append(out, c)
			newline()
		case ':':
			out = append(out, c, ' ')
		case '}', ']':
			if needIndent { // an empty object or array stays {} / []
				needIndent = false
			} else {
				depth--
				newline()
			}
			out = append(out, c)
		default:
			out = append(out, c)
		}
	}
	return out, len(out) > limit
}
