package main

import (
	"fmt"
	"io"
)

// termSafe wraps the command output: a DLQ entry's topic, message, labels
// and payload are written by whoever produced the failing job, and a
// terminal acts on the control characters in them (an escape sequence
// can rewrite the screen, retitle the window or, in some terminals,
// answer back as typed input). Every C0 control but tab and newline, DEL
// and the C1 controls (U+0080-U+009F) are written as visible escapes
// (\x1b, \u009b). JSON output is unchanged: encoding/json already escapes
// the C0 controls, and a C1 control in a JSON string reads back the same
// whether escaped or not. stderr (logs, the progress bar) is not wrapped.
type termSafe struct {
	w io.Writer
	// lead is a 0xC2 held back from the end of the last write: with the
	// next write's first byte it may be a C1 control.
	lead bool
}

func (t *termSafe) Write(p []byte) (int, error) {
	in := p
	if t.lead {
		in = append([]byte{0xC2}, p...)
		t.lead = false
	}
	clean := true
	for i, b := range in {
		if unsafeByte(in, i) {
			clean = false
			break
		}
		if b == 0xC2 && i == len(in)-1 {
			clean = false
			break
		}
	}
	if clean {
		if _, err := t.w.Write(in); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	out := make([]byte, 0, len(in)+16)
	for i := 0; i < len(in); i++ {
		b := in[i]
		switch {
		case b == 0xC2 && i == len(in)-1:
			t.lead = true
		case b == 0xC2 && in[i+1] >= 0x80 && in[i+1] <= 0x9F:
			out = fmt.Appendf(out, `\u%04x`, in[i+1])
			i++
		case unsafeByte(in, i):
			out = fmt.Appendf(out, `\x%02x`, b)
		default:
			out = append(out, b)
		}
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// unsafeByte: in[i] is a control a terminal would act on (a C0 control
// other than tab and newline, DEL, or the lead byte of a C1 control).
func unsafeByte(in []byte, i int) bool {
	b := in[i]
	switch {
	case b == '\t' || b == '\n':
		return false
	case b < 0x20 || b == 0x7f:
		return true
	case b == 0xC2 && i+1 < len(in):
		return in[i+1] >= 0x80 && in[i+1] <= 0x9F
	}
	return false
}

// Flush writes a 0xC2 held back at the end of the output as it is (it
// began no C1 control).
func (t *termSafe) Flush() error {
	if !t.lead {
		return nil
	}
	t.lead = false
	_, err := t.w.Write([]byte{0xC2})
	return err
}
