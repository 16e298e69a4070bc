package main

import (
	"bytes"
	"encoding/json"
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
		{"carriage return, backspace", []string{"a\rb\bc"}, `a\x0db\x08c`},
		{"NUL", []string{"a\x00b"}, `a\x00b`},
		{"DEL and C1 pass, as JSON carries them", []string{"a\x7f\u009bb"}, "a\x7f\u009bb"},
		{"JSON as encoding/json writes it", []string{`{"m":"\u001b[2J\r\n"}` + "\n"}, `{"m":"\u001b[2J\r\n"}` + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			w := &termSafe{w: &b}
			for _, s := range c.writes {
				if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
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
// and one that would clear the screen); -o json is JSON, byte for byte.
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
		if strings.ContainsAny(out.String(), "\x1b\x07") {
			t.Errorf("%v printed a raw control character:\n%q", args, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"dlq", "show", "e1", "--db", db}, nil, &out, &errb); code != exitOK || !strings.Contains(out.String(), `boom\x1b]0;pwned\x07`) {
		t.Errorf("dlq show does not show the escape visibly (exit %d):\n%s", code, out.String())
	}
	out.Reset()
	var d struct {
		Entry struct {
			Entry struct {
				Message string `json:"message"`
			} `json:"entry"`
		} `json:"entry"`
	}
	if code := run([]string{"dlq", "show", "e1", "-o", "json", "--db", db}, nil, &out, &errb); code != exitOK || json.Unmarshal(out.Bytes(), &d) != nil ||
		d.Entry.Entry.Message != "boom\x1b]0;pwned\x07 \u009b6n" {
		t.Errorf("-o json does not carry the message as stored (exit %d, %q):\n%s", code, d.Entry.Entry.Message, out.String())
	}
}
