package fuzzy

import "testing"

func FuzzFine(f *testing.F) {
	f.Add([]byte("a"))
	f.Fuzz(func(t *testing.T, b []byte) {})
}

// FuzzFinds fails on the first input whose length is not 1: the fuzzer
// finds one within a few executions.
func FuzzFinds(f *testing.F) {
	f.Add([]byte("a"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) != 1 {
			t.Fatalf("input of %d bytes", len(b))
		}
	})
}

func TestNotFuzz(t *testing.T) {}
