package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTermSafeEscapesControls(t *testing.T) {
	for _, c := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"plain text and tables", []string{"a\tb\nc€é\n"}, "a\tb\nc€é\n"},
		{"an OSC title sequence", []string{"x\x1b]0;pwned\x07y"}, `x\x1b]0;pwned\x07y`},
		{"carriage return, backspace, DEL", []string{"a\rb\bc\x7f"}, `a\x0db\x08c\x7f`},
		{"NUL", []string{"a\x00b"}, `a\x00b`},
		{"a C1 CSI", []string{"a\u009b2Jb"}, `a\u009b2Jb`},
		{"a C1 control split across writes", []string{"a\xc2", "\x9bz"}, `a\u009bz`},
		{"a Latin-1 letter split across writes", []string{"a\xc2", "\xa9z"}, "a©z"},
		{"a lead byte left at the end", []string{"a\xc2"}, "a\xc2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			w := &termSafe{w: &b}
			for _, s := range c.writes {
				if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("wrote %q, want %q", b.String(), c.want)
			}
		})
	}
}

// An entry's message and topic come from whoever produced the failing
// job: `dlq show` and `dlq list` print them without the terminal acting
// on the escape sequences inside (here one that would retitle the window
// and one that would clear the screen); -o json stays JSON.
func TestEntryTextCannotDriveTheTerminal(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "replayctl.db")
	dlq := filepath.Join(dir, "dlq.jsonl")
	line := `{"id":"e1","topic":"orders\u001b[2J","reason_code":"timeout","message":"boom\u001b]0;pwned\u0007 \u009b6n","payload":{}}` + "\n"
	if err := os.WriteFile(dlq, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	engine := []string{"--rules", "../../rules.yaml", "--policies", "../../policies", "--db", db}
	var out, errb bytes.Buffer
	if code := run(append([]string{"reconcile", "--source", "jsonl:" + dlq}, engine...), nil, &out, &errb); code != exitOK {
		t.Fatalf("reconcile: exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, args := range [][]string{{"dlq", "show", "e1"}, {"dlq", "list"}, {"audit", "explain", "e1"}, {"stats"}} {
		out.Reset()
		errb.Reset()
		if code := run(append(args, "--db", db), nil, &out, &errb); code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out.String(), errb.String())
		}
		if strings.ContainsAny(out.String(), "\x1b\x07\u009b") {
			t.Errorf("%v printed a raw control character:\n%q", args, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"dlq", "show", "e1", "--db", db}, nil, &out, &errb); code != exitOK || !strings.Contains(out.String(), `boom\x1b]0;pwned\x07`) {
		t.Errorf("dlq show does not show the escape visibly (exit %d):\n%s", code, out.String())
	}
}
