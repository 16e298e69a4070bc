package postgres

import (
	"strings"
	"testing"
)

// PostgreSQL's hashed keys keep the form tables written before hold
// (hashkey_test.go in store checks bbolt's and the indexes'); the digest
// is sha256sum of the input, computed outside Go.
func TestPGHashedKeysKeepTheirStoredForm(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"pgKey of a 40000-byte key", pgKey(strings.Repeat("k", 40000)),
			"\x01sha256:dc38936f0a46a179d2348f37e9c069d9b36bd368297a2665c48a85bcb32908e5"},
		{"a short key stays as it is", pgKey("k1"), "k1"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
}
