package store

import (
	"crypto/sha256"
	"encoding/hex"
)

// HashKey is the stored form of a key, ref, id or indexed value that
// cannot be kept as it is (too long, or unfit for the column): prefix and
// the hex SHA-256 of b. bbolt's DBKey, IKey and ValKey and PostgreSQL's
// pgKey all use it, each with its own prefix, so files and tables written
// before keep their keys.
func HashKey(prefix string, b []byte) string {
	sum := sha256.Sum256(b)
	return prefix + hex.EncodeToString(sum[:])
}
