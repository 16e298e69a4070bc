package connectortest

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
)

// TD names a file under the repository's testdata directory, wherever
// the calling test's package is.
func TD(parts ...string) string {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata")
	return filepath.Join(append([]string{root}, parts...)...)
}

// ReadAll reads every entry of src, failing the test on a fatal error,
// and checks what every entry must have (CheckEntry).
func ReadAll(t testing.TB, src connector.Source) []entry.Entry {
	t.Helper()
	var out []entry.Entry
	for e, err := range src.Entries(context.Background()) {
		if err != nil {
			t.Fatalf("%s: fatal error after %d entries: %v", src, len(out), err)
		}
		CheckEntry(t, e)
		out = append(out, e)
	}
	return out
}

// CheckEntry checks the fields every yielded entry must have.
func CheckEntry(t testing.TB, e entry.Entry) {
	t.Helper()
	if e.ID == "" || e.Origin == "" || e.IdempotencyKey == "" || e.Source == "" {
		t.Fatalf("entry lacks ID, Origin, IdempotencyKey or Source: %+v", e)
	}
	if e.Undecodable() && !e.KeyDerived {
		t.Fatalf("undecodable entry must have a derived key: %+v", e)
	}
	// A file source's undecodable record is named where it was; an item
	// file of a job (scoped by the job) by job and file name, a live
	// source's by its own id or content (records.StableID).
	local := e.Undecodable() && !strings.Contains(e.Origin, "://")
	if local && e.Scope == "" && e.ID != e.Origin {
		t.Fatalf("undecodable record of a file must be named by its origin: %+v", e)
	}
	if local && e.Scope != "" && e.ID != strings.TrimSuffix(filepath.Base(e.Origin), ".json") {
		t.Fatalf("undecodable item of a job must be named JOB/ITEM after its file: %+v", e)
	}
}

// ByID maps the entries by id; two entries with one id fail the test.
func ByID(t testing.TB, es []entry.Entry) map[string]entry.Entry {
	t.Helper()
	m := make(map[string]entry.Entry, len(es))
	for _, e := range es {
		if _, dup := m[e.ID]; dup {
			t.Fatalf("duplicate id %q", e.ID)
		}
		m[e.ID] = e
	}
	return m
}

// IDs lists the entries' ids in order.
func IDs(es []entry.Entry) []string {
	var s []string
	for _, e := range es {
		s = append(s, e.ID)
	}
	return s
}

// MustRead reads a file or fails the test.
func MustRead(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Mkdir makes dir and its parents or fails the test.
func Mkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// Write writes data to path or fails the test.
func Write(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Snapshot maps every file under root (relative path) to its content.
func Snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		m[rel] = MustRead(t, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// WriteFile writes data to name in a fresh temporary directory and
// returns its path.
func WriteFile(t testing.TB, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	Write(t, path, data)
	return path
}
