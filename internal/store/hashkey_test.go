package store

import (
	"strings"
	"testing"
)

// The hashed forms of long keys are what files and tables written before
// hold: one helper now builds them all, and they must not move. The
// digests are sha256sum of the inputs, computed outside Go.
func TestHashedKeysKeepTheirStoredForm(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"DBKey of a 40000-byte key", string(DBKey(strings.Repeat("k", 40000))),
			"\x00sha256:dc38936f0a46a179d2348f37e9c069d9b36bd368297a2665c48a85bcb32908e5"},
		{"DBKey of a key that looks hashed", string(DBKey("\x00sha256:abc")),
			"\x00sha256:8aaf7fba0d72c4ef628d7adb1007d23849598e562195c6eed3fef1cf9c736e33"},
		{"ValKey of a 1025-byte topic", ValKey(strings.Repeat("t", 1025)),
			"\x00sha256:d6e072035fe102d4d5acc3b665f8b14b926bfed68b6133d32172d3e04a92c235"},
		{"IKey of a 2100-byte ref", string(IKey(strings.Repeat("r", 2100))),
			"\x00sha256:9a12407951304313f4f909d1efe5c01f6d54393b311fb3a148f53c26625535af"},
		{"short keys stay as they are", string(DBKey("k1")) + ValKey("orders") + string(IKey("jsonl:e1")),
			"k1ordersjsonl:e1"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
}
