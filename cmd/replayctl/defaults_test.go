package main

import (
	"context"
	"crypto/sha256"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/policy"
)

// The built-in rules and policy are the bundled files: the same snapshot
// id, so a decision made with one re-runs with the other and an approval
// stays valid when a user copies the files out (`rules show`, `policy show
// --dir`).
func TestBuiltinDefaultsAreTheBundledFiles(t *testing.T) {
	ctx := context.Background()
	_, files, err := policy.LoadEngine(ctx, "../../rules.yaml", "../../policies", policy.DefaultTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var notes strings.Builder
	eng := engineFlags{rules: defaultRules, policies: defaultPolicies, policyTimeout: policy.DefaultTimeout, notes: &notes}
	t.Chdir(t.TempDir())
	_, builtin, err := eng.load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if builtin.ID != files.ID {
		t.Errorf("built-in snapshot %s, bundled files %s", builtin.ID, files.ID)
	}
	if !strings.Contains(notes.String(), "using the built-in rules") {
		t.Errorf("no note that the built-in rules are used: %q", notes.String())
	}
}

// The README's first command runs as written (go run replaced by the
// command itself, $(mktemp -d) by a temporary directory) from the
// checkout's root and changes no file of the checkout: the samples are
// read, never written back (issue 30: a Prodigy write-back deleted tracked
// files and the next `make test` failed).
func TestReadmeFirstCommandChangesNoTrackedFile(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go run \./cmd/replayctl (reconcile .*)$`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("README has no `go run ./cmd/replayctl reconcile ...` line")
	}
	line := strings.ReplaceAll(string(m[1]), `"$(mktemp -d)`, `"`+t.TempDir())
	args := strings.Fields(strings.ReplaceAll(line, `"`, ""))
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	before := hashTree(t, root)
	t.Chdir(root)
	var out, errb strings.Builder
	if code := run(args, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("replayctl %s: exit %d\n%s%s", line, code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "38 entries") {
		t.Errorf("the README says the samples hold 38 entries; the run says:\n%s", out.String())
	}
	after := hashTree(t, root)
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s was created in the checkout", p)
		}
	}
}

// hashTree hashes the sample data and the bundled defaults under root.
func hashTree(t *testing.T, root string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	for _, dir := range []string{"testdata", "policies", "rules.yaml"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			h := sha256.New()
			if _, err := io.Copy(h, f); err != nil {
				return err
			}
			out[p] = [32]byte(h.Sum(nil))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The state file a careless command would leave in the checkout.
	if _, err := os.Stat(filepath.Join(root, "replayctl.db")); err == nil {
		out[filepath.Join(root, "replayctl.db")] = [32]byte{}
	}
	return out
}
