package source

import (
	"context"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// TestMalformed reads every nasty sample with every kind that might be
// pointed at it: no panic, no fatal error, every record accounted for and
// every undecodable entry naming where it was, by the file's canonical path.
func TestMalformed(t *testing.T) {
	tests := []struct {
		kind, file string
		want       []string // ids; F stands for the file's canonical path
	}{
		{"cordum", "empty.json", nil},
		{"nexora", "empty.json", nil},
		{"jsonl", "empty.json", nil},
		{"cordum", "garbage.bin", []string{"F:1", "F:2", "F:3", "F:4"}},
		{"jsonl", "garbage.bin", []string{"F:1", "F:2", "F:3", "F:4"}},
		{"nexora", "garbage.bin", []string{"F"}},
		{"cordum", "open-bracket.json", []string{"F:1"}},
		{"nexora", "open-bracket.json", []string{"F:1"}},
		{"jsonl", "open-bracket.json", []string{"F:1"}},
		{"nexora", "nexora-items-number.json", []string{"F"}},
		// Cordum list responses are {"items": [...]} too: one error naming the file.
		{"cordum", "nexora-items-number.json", []string{"F"}},
		{"jsonl", "lines.jsonl", []string{"ok-1", "F:3", "F:4", "ok-2"}},
		{"cordum", "lines.jsonl", []string{"F:1", "F:3", "F:4", "F:5"}},
		{"cordum", "truncated-array.json", []string{"job_a1", "F:3"}},
		{"nexora", "truncated-array.json", []string{"F#0", "F:3"}},
		{"prodigy", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.kind+"/"+tt.file, func(t *testing.T) {
			path := td("malformed", tt.file)
			es := readAll(t, tt.kind+":"+path)
			if len(es) != len(tt.want) {
				t.Fatalf("got %d entries %v, want %d", len(es), ids(es), len(tt.want))
			}
			for i, e := range es {
				want := tt.want[i]
				if strings.HasPrefix(want, "F") {
					want = records.Canonical(path) + want[1:]
					if !e.Undecodable() || e.DecodeError == "" {
						t.Errorf("entry %d should be undecodable: %+v", i, e)
					}
				} else if e.Undecodable() {
					t.Errorf("entry %d: unexpected decode error %q", i, e.DecodeError)
				}
				if e.ID != want || e.Source != tt.kind {
					t.Errorf("entry %d: id %q source %q, want %q %s", i, e.ID, e.Source, want, tt.kind)
				}
			}
		})
	}
}

func TestRestOfFileUnreadable(t *testing.T) {
	path := td("malformed", "truncated-array.json")
	es := readAll(t, "cordum:"+path)
	msg := es[len(es)-1].DecodeError
	for _, want := range []string{"rest of file unreadable", "element #1", "line 3", "byte 54"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not mention %q", msg, want)
		}
	}
}

// TestLongLines checks lines longer than bufio's buffer are read whole, and
// a line over the cap is reported and skipped without losing the next.
func TestLongLines(t *testing.T) {
	long := `{"id":"long","payload":"` + strings.Repeat("x", 200<<10) + `"}`
	huge := `{"id":"huge","payload":"` + strings.Repeat("y", 300<<10) + `"}`
	data := long + "\n" + huge + "\n" + `{"id":"after"}` + "\n" + huge // last line without newline
	rr := records.Reader{Format: jsonl.Format(), Name: "big.jsonl", R: strings.NewReader(data), MaxLine: 256 << 10}
	var es []entry.Entry
	rr.Each(context.Background(), func(e entry.Entry, err error) bool {
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
		return true
	})
	if len(es) != 4 {
		t.Fatalf("got %v, want 4 entries", ids(es))
	}
	if es[0].ID != "long" || len(es[0].Payload) != 200<<10+2 {
		t.Errorf("long line: id %q payload %d bytes", es[0].ID, len(es[0].Payload))
	}
	for _, i := range []int{1, 3} {
		if want := "big.jsonl:" + itoa(i+1); es[i].ID != want || !strings.Contains(es[i].DecodeError, "line longer than") {
			t.Errorf("entry %d: %q %q, want %s too long", i, es[i].ID, es[i].DecodeError, want)
		}
	}
	if es[2].ID != "after" {
		t.Errorf("the line after a too-long line was lost: %v", ids(es))
	}
}
