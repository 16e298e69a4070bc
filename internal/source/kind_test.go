package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A Cordum dump given as jsonl (or the other way round) is refused before
// anything is stored, naming the kind it decodes as (issue 30: every record
// was quarantined as poison and the run exited 0). A file of records bad
// under every kind, and a right kind with some bad records, are left to
// the run.
func TestCheckKindRefusesAWrongKind(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join("..", "..", "testdata")
	cordum := filepath.Join(root, "cordum", "dlq.jsonl")
	jsonl := filepath.Join(root, "jsonl", "entries.jsonl")
	for _, tc := range []struct {
		spec, want string
	}{
		{"jsonl:" + cordum, "decode as cordum"},
		{"cordum:" + jsonl, "decode as jsonl"},
	} {
		err := CheckKind(ctx, tc.spec)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckKind(%s) = %v, want a usage error saying %q", tc.spec, err, tc.want)
		}
	}
	garbage := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(garbage, []byte("not json\n{\"x\":\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"cordum:" + cordum, "jsonl:" + jsonl, "jsonl:" + garbage, "prodigy:" + filepath.Join(root, "prodigy")} {
		if err := CheckKind(ctx, spec); err != nil {
			t.Errorf("CheckKind(%s) = %v, want nil", spec, err)
		}
	}
}
