package guided

import "testing"

// FuzzGuided fails only on an input that begins "fz!". Coverage guidance
// finds it (each matching byte is a new branch): with this package
// instrumented, 500000 executions found it in 30 runs of 30 (100000 in
// 14 of 20), usually within a second. Blind mutation of "a" has a chance
// of about 3% in 500000.
func FuzzGuided(f *testing.F) {
	f.Add([]byte("a"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 && b[0] == 'f' {
			if len(b) > 1 && b[1] == 'z' {
				if len(b) > 2 && b[2] == '!' {
					t.Fatalf("guided to %q", b)
				}
			}
		}
	})
}
