package gen_test

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/connector/registry"
	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/source"
)

func TestEveryFormatReadsBackEveryRecord(t *testing.T) {
	for _, f := range registry.GenFormats() {
		t.Run(f.Kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "dlq")
			spec, err := gen.Write(f, path, gen.Options{N: 400, Seed: 1, Malformed: 0.02})
			if err != nil {
				t.Fatal(err)
			}
			src, err := source.Parse(spec)
			if err != nil {
				t.Fatal(err)
			}
			n, bad := 0, 0
			for e, err := range src.Entries(context.Background()) {
				if err != nil {
					t.Fatal(err)
				}
				n++
				if e.Undecodable() {
					bad++
				}
			}
			// A malformed element of a JSON array (nexora) is named and kept,
			// the others resynchronise at the next line or file.
			if n != 400 || bad == 0 {
				t.Fatalf("%d entries read (%d undecodable), want 400 with some undecodable", n, bad)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	sum := func() [32]byte {
		p := filepath.Join(t.TempDir(), "a.jsonl")
		if _, err := gen.Write(jsonl.GenFormat(), p, gen.Options{N: 200, Seed: 42}); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		return sha256.Sum256(b)
	}
	if sum() != sum() {
		t.Fatal("same seed, different corpus")
	}
}
