package source

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/connectortest"
	"github.com/replayctl/replayctl/internal/entry"
)

// td names a file under the repository's testdata directory.
func td(parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "testdata"}, parts...)...)
}

// readAll parses spec and reads every entry, failing the test on a fatal
// error. It also checks what every entry must have.
func readAll(t *testing.T, spec string) []entry.Entry {
	t.Helper()
	src, err := Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	var out []entry.Entry
	for e, err := range src.Entries(context.Background()) {
		if err != nil {
			t.Fatalf("%s: fatal error after %d entries: %v", spec, len(out), err)
		}
		checkEntry(t, e)
		out = append(out, e)
	}
	return out
}

// checkEntry checks the fields every yielded entry must have.
func checkEntry(t testing.TB, e entry.Entry) { t.Helper(); connectortest.CheckEntry(t, e) }

func byID(t *testing.T, es []entry.Entry) map[string]entry.Entry { return connectortest.ByID(t, es) }

// writeFile writes data to name in a fresh temporary directory.
func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParse(t *testing.T) {
	file := td("cordum", "dlq.jsonl")
	for _, spec := range []string{
		"cordum:" + file,
		"cordum:" + td("cordum", "entry.json"),
		"nexora:" + td("nexora", "dead-letters.json"),
		"jsonl:" + td("jsonl", "entries.jsonl"),
		"prodigy:" + td("prodigy"),
	} {
		src, err := Parse(spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", spec, err)
			continue
		}
		if src.String() != spec {
			t.Errorf("String() = %q, want %q", src.String(), spec)
		}
		_, wb := connector.SettlerOf(src)
		if want := strings.HasPrefix(spec, "prodigy:"); wb != want {
			t.Errorf("%s: has a write-back (connector.SettlerOf) = %v, want %v", spec, wb, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		spec    string
		is      error  // errors.Is target, when set
		mention string // what the message must say
	}{
		{spec: "", mention: "want KIND:PATH"},
		{spec: "testdata/dlq.jsonl", mention: "want KIND:PATH"},
		{spec: ":x", mention: "want KIND:PATH"},
		{spec: "rabbit:" + file0(t), mention: `unknown source kind "rabbit"`},
		{spec: "cordum:", mention: "missing path"},
		{spec: "cordum:" + filepath.Join(dir, "nope.jsonl"), is: fs.ErrNotExist},
		{spec: "cordum-redis:localhost:6379", mention: "not a redis:// URL"},
		{spec: "prodigy:" + file0(t), mention: "not a directory"},
		{spec: "nexora:" + dir, mention: "is a directory"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.spec)
		if err == nil {
			t.Errorf("Parse(%q) succeeded", tt.spec)
			continue
		}
		var ue *UsageError
		if !errors.As(err, &ue) || ue.Hint == "" || ue.Spec != tt.spec {
			t.Errorf("Parse(%q) = %#v, want a *UsageError with a hint", tt.spec, err)
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("Parse(%q) = %v, want errors.Is %v", tt.spec, err, tt.is)
		}
		if !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("Parse(%q) = %q, want it to mention %q", tt.spec, err, tt.mention)
		}
	}
	_, err := Parse("rabbit:x")
	if msg := err.Error(); !strings.Contains(msg, "cordum, cordum-redis, prodigy, nexora, jsonl") {
		t.Errorf("unknown kind error %q does not list the kinds", msg)
	}
}

func file0(t *testing.T) string { return writeFile(t, "f.json", "") }

func TestFatalErrorYieldedOnce(t *testing.T) {
	path := writeFile(t, "dlq.jsonl", `{"job_id":"a"}`+"\n")
	src, err := Parse("cordum:" + path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	n := 0
	for e, err := range src.Entries(context.Background()) {
		n++
		if err == nil || e.ID != "" || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("got (%+v, %v), want (zero entry, not-exist error)", e, err)
		}
	}
	if n != 1 {
		t.Errorf("got %d yields, want 1", n)
	}
}

func TestCancelStopsBetweenRecords(t *testing.T) {
	for _, spec := range []string{
		"cordum:" + td("cordum", "dlq.jsonl"),
		"cordum:" + td("cordum", "array.json"),
		"nexora:" + td("nexora", "dead-letters.json"),
		"jsonl:" + td("jsonl", "entries.jsonl"),
		"prodigy:" + td("prodigy"),
	} {
		src, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var got []error
		for _, err := range src.Entries(ctx) {
			got = append(got, err)
			cancel()
		}
		cancel()
		if len(got) != 2 || got[0] != nil || !errors.Is(got[1], context.Canceled) {
			t.Errorf("%s: after cancelling at the first entry got %v, want [nil, context.Canceled]", spec, got)
		}
	}
}

func TestDerivedKeyStable(t *testing.T) {
	spec := "cordum:" + td("cordum", "dlq.jsonl")
	first, second := readAll(t, spec), readAll(t, spec)
	if len(first) != len(second) {
		t.Fatalf("two reads gave %d and %d entries", len(first), len(second))
	}
	derived := 0
	for i := range first {
		a, b := first[i], second[i]
		if a.IdempotencyKey != b.IdempotencyKey {
			t.Errorf("%s: key %q then %q", a.ID, a.IdempotencyKey, b.IdempotencyKey)
		}
		if a.KeyDerived {
			derived++
			if want := entry.DeriveKey("cordum", a.ID); a.IdempotencyKey != want {
				t.Errorf("%s: derived key %q, want entry.DeriveKey = %q", a.ID, a.IdempotencyKey, want)
			}
		}
	}
	if derived != 2 { // job_81a3 has no key; line 8 is undecodable
		t.Errorf("got %d derived keys, want 2", derived)
	}
}

// All reads its sources one after another and names the source of a fatal
// error, as Planner.Plan did.
func TestAllConcatenatesSourcesInOrder(t *testing.T) {
	a := writeFile(t, "a.jsonl", `{"id":"a1"}`+"\n"+`{"id":"a2"}`+"\n")
	b := writeFile(t, "b.jsonl", `{"id":"b1"}`+"\n")
	var srcs []Source
	for _, spec := range []string{"jsonl:" + a, "jsonl:" + b} {
		s, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, s)
	}
	var ids []string
	for e, err := range All(srcs)(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	if strings.Join(ids, ",") != "a1,a2,b1" {
		t.Errorf("ids %v, want a1,a2,b1", ids)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	var last error
	for _, err := range All(srcs)(context.Background()) {
		last = err
	}
	if last == nil || !strings.Contains(last.Error(), "source jsonl:"+b+": ") || !errors.Is(last, fs.ErrNotExist) {
		t.Errorf("error %v, want it to name source jsonl:%s and wrap fs.ErrNotExist", last, b)
	}
}
