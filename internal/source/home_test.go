package source

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseExpandsHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, ".prodigy", "dlq", "repo"), 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := Parse("prodigy:~/.prodigy/dlq/repo")
	if err != nil {
		t.Fatal(err)
	}
	if src.String() != "prodigy:~/.prodigy/dlq/repo" {
		t.Fatalf("spec not kept as given: %s", src)
	}
}
