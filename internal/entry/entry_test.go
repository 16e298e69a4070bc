package entry

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
)

const (
	compactPayload = `{"repo":"acme/api","title":"Fix <b>&</b>"}`
	prettyPayload  = "{\n  \"repo\": \"acme/api\",\n  \"title\": \"Fix <b>&</b>\"\n}"
)

func sum(b string) string {
	s := sha256.Sum256([]byte(b))
	return "sha256:" + hex.EncodeToString(s[:])
}

// The hash is of the bytes a replay forwards, as they are: no compaction
// (issue 16: json.Compact was 39% of a decision).
func TestPayloadHashIsOfTheForwardedBytes(t *testing.T) {
	for _, p := range []string{compactPayload, prettyPayload, "", "not json {", "null"} {
		if got, want := PayloadHash(json.RawMessage(p)), sum(p); got != want {
			t.Errorf("PayloadHash(%q) = %s, want sha256 of the bytes %s", p, got, want)
		}
		if PayloadHash(json.RawMessage(p)) != PayloadHash(json.RawMessage([]byte(p))) {
			t.Errorf("PayloadHash(%q) is not stable for the same bytes", p)
		}
	}
	if PayloadHash(json.RawMessage(prettyPayload)) == PayloadHash(json.RawMessage(compactPayload)) {
		t.Error("pretty and compact copies hash alike: the payload was re-formatted before hashing")
	}
}

// A ledger written before issue 16 stored sha256 of the compacted payload.
func TestLegacyPayloadHashIsTheOldScheme(t *testing.T) {
	if got, want := LegacyPayloadHash(json.RawMessage(prettyPayload)), sum(compactPayload); got != want {
		t.Errorf("legacy hash of the pretty payload = %s, want the compacted bytes' %s", got, want)
	}
	if got, want := LegacyPayloadHash(json.RawMessage("not json {")), sum("not json {"); got != want {
		t.Errorf("legacy hash of invalid JSON = %s, want the bytes' %s", got, want)
	}
	// Compact payloads hash the same in both schemes: most stored hashes
	// match the new one outright.
	if PayloadHash(json.RawMessage(compactPayload)) != LegacyPayloadHash(json.RawMessage(compactPayload)) {
		t.Error("a compact payload hashes differently in the two schemes")
	}
}

func TestPayloadHashAgainstKeepsALegacyStoredHash(t *testing.T) {
	pretty := json.RawMessage(prettyPayload)
	legacy := LegacyPayloadHash(pretty)
	cases := []struct {
		name, stored, want string
	}{
		{"no ledger record", "", PayloadHash(pretty)},
		{"stored in the new scheme", PayloadHash(pretty), PayloadHash(pretty)},
		{"stored in the old scheme, same payload", legacy, legacy},
		{"a different payload", sum(`{"repo":"acme/other"}`), PayloadHash(pretty)},
	}
	for _, c := range cases {
		if got := PayloadHashAgainst(pretty, c.stored); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}
