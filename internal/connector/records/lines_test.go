package records

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }

func TestLineReader(t *testing.T) {
	in := "a\r\n\nbb\n" + strings.Repeat("c", 70000) + "\nd"
	lr := newLineReader(bufioReader(in), 1<<20)
	var got []string
	for {
		line, tooLong, err := lr.next()
		if err != nil {
			break
		}
		if tooLong {
			t.Fatal("unexpected tooLong")
		}
		got = append(got, string(line))
	}
	want := []string{"a\r", "", "bb", strings.Repeat("c", 70000), "d"}
	if len(got) != len(want) || lr.line != 5 {
		t.Fatalf("got %d lines (line %d), want %d", len(got), lr.line, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %d bytes, want %d", i+1, len(got[i]), len(want[i]))
		}
	}
	if !bytes.Equal(TrimSpace([]byte(" \t{}\r\n")), []byte("{}")) {
		t.Error("trimSpace")
	}
}
