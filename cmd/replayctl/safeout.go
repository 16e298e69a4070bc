package main

import (
	"fmt"
	"io"
)

// termSafe wraps the command output: a DLQ entry's topic, message and
// labels are written by whoever produced the failing job, and a terminal
// acts on the control characters in them (an escape sequence can rewrite
// the screen, retitle the window or, in some terminals, answer back as
// typed input). Every C0 control but tab and newline is written as a
// visible escape (\x1b). JSON output passes byte for byte: encoding/json
// escapes every C0 control itself, so valid JSON holds none, and `audit
// export`'s bodies still hash to their chain. (DEL and the C1 controls are
// left alone for that reason: JSON carries them raw, and UTF-8 terminals
// do not act on C1 as 8-bit controls.) stderr (logs, the progress bar) is
// not wrapped.
type termSafe struct{ w io.Writer }

func (t *termSafe) Write(p []byte) (int, error) {
	i := 0
	for i < len(p) && !isC0(p[i]) {
		i++
	}
	if i == len(p) {
		return t.w.Write(p)
	}
	out := make([]byte, 0, len(p)+16)
	for _, b := range p {
		if isC0(b) {
			out = fmt.Appendf(out, `\x%02x`, b)
		} else {
			out = append(out, b)
		}
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// isC0: b is a C0 control a terminal acts on (not tab or newline).
func isC0(b byte) bool { return b < 0x20 && b != '\t' && b != '\n' }
