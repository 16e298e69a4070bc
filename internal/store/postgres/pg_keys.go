package postgres

import (
	"github.com/replayctl/replayctl/internal/store"
	"strings"
	"unicode/utf8"
)

// pgMaxKey bounds the keys PostgreSQL indexes as they are. A btree entry
// must fit in a third of a page (about 2.7 KB after compression): a longer
// idempotency key, entry ref or approval id made the write fail (issue 14
// for bbolt, where the limit is 32 KiB).
const pgMaxKey = 1024

// pgHashedPrefix marks a stored key that is the hash of a longer one
// (bbolt's prefix starts with NUL, which a text column refuses).
const pgHashedPrefix = "\x01sha256:"

// pgKey is the stored key for an idempotency key, entry ref or approval
// id: as it is when short, else its SHA-256, as bbolt's store.DBKey does; the
// original stays in the record. A key that is not UTF-8 or holds NUL (a
// text column refuses both) or looks like a hashed one is hashed too, so
// none collide.
func pgKey(s string) string {
	if len(s) <= pgMaxKey && utf8.ValidString(s) && !strings.ContainsRune(s, 0) && !strings.HasPrefix(s, pgHashedPrefix) {
		return s
	}
	return store.HashKey(pgHashedPrefix, []byte(s))
}

// pgKeysMigration moves keys stored as they were before pgKey (up to the
// index limit, when they compressed well) to where pgKey looks for them.
const pgKeysMigration = `UPDATE ledger SET key = chr(1) || 'sha256:' || encode(sha256(convert_to(key, 'UTF8')), 'hex') WHERE octet_length(key) > 1024;
	 UPDATE entries SET ref = chr(1) || 'sha256:' || encode(sha256(convert_to(ref, 'UTF8')), 'hex') WHERE octet_length(ref) > 1024;
	 UPDATE approvals SET id = chr(1) || 'sha256:' || encode(sha256(convert_to(id, 'UTF8')), 'hex') WHERE octet_length(id) > 1024;`
