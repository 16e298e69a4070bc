package postgres

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"

	"github.com/replayctl/replayctl/internal/audit"
)

// The owner of an audit record as a column (schema version 20, issue 33).
// Migration 12 indexed each record under replayctl_audit_owner(body), an
// expression: every record inserted ran a PL/pgSQL function that parsed
// its JSON inside an exception block (a subtransaction), and so did every
// sealer's update of a record that left its page. By perf over 4 workers
// that was ~3% of PostgreSQL's CPU, ~35 µs a replay of three records. The
// writer knows the record it encodes, so it writes the owner as a plain
// column (auditOwnerOf) and the index is on the column; the reads
// (EntryAudit, ChainSucceeded, lastAuditTimes) ask for the owners they
// asked the expression for. The column holds the owner's key, the first
// 8 bytes of the md5 of the expression's value (replayctl_owner_key,
// ownerKey; 0 for a record naming neither an entry nor a key, the
// expression's NULL), not the 33 characters of the value: a row that
// grew by those did not leave room on its page for the sealer's version
// of it (TestPostgresSealerUpdatesRecordsOnTheirPage), and the index is
// smaller. Two owners sharing a key only widen what a read finds, and
// every read keeps only the records about its entry or key.
//
// A row inserted without the column (a replayctl older than version 20
// still running during the upgrade, which checked the version when it
// started; a row inserted outside replayctl) gets it from its body by a
// BEFORE trigger, whose WHEN clause skips the rows that have it before any
// function runs; so does a row whose body is rewritten (never by
// replayctl: a forgery, which the chain's verification reports, is
// indexed under what it now says, as the expression indexed it). The
// older binary's own reads still spell the expression: they keep their
// answers, without an index.
const pgAuditOwnerMigration = `CREATE FUNCTION replayctl_owner_key(o text) RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE
	   AS $$ SELECT CASE WHEN o IS NULL THEN 0 ELSE ('x' || left(md5(o), 16))::bit(64)::bigint END $$;
	 ALTER TABLE audit ADD COLUMN owner bigint;
	 UPDATE audit SET owner = replayctl_owner_key(replayctl_audit_owner(body));
	 CREATE FUNCTION replayctl_audit_owner_col() RETURNS trigger LANGUAGE plpgsql AS $$
	 BEGIN
	   NEW.owner := replayctl_owner_key(replayctl_audit_owner(NEW.body));
	   RETURN NEW;
	 END $$;
	 CREATE TRIGGER audit_owner_ins BEFORE INSERT ON audit FOR EACH ROW
	   WHEN (NEW.owner IS NULL) EXECUTE FUNCTION replayctl_audit_owner_col();
	 CREATE TRIGGER audit_owner_upd BEFORE UPDATE OF body ON audit FOR EACH ROW
	   EXECUTE FUNCTION replayctl_audit_owner_col();
	 CREATE INDEX audit_owner_col ON audit (owner, seq);
	 DROP INDEX audit_owner;`

// ownerKey is replayctl_owner_key: the key of the owner o, as
// replayctl_audit_owner spells it ('r' or 'k' and an md5 in hex, '?'),
// 0 for none.
func ownerKey(o string) int64 {
	if o == "" {
		return 0
	}
	sum := md5.Sum([]byte(o))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// refOwner and keyOwner are the owners replayctl_audit_owner gives the
// records about an entry's ref and about an idempotency key, as it reads
// them from a record's body: the md5 of the string's bytes.
func refOwner(ref string) string {
	sum := md5.Sum([]byte(ref))
	return "r" + hex.EncodeToString(sum[:])
}

func keyOwner(key string) string {
	sum := md5.Sum([]byte(key))
	return "k" + hex.EncodeToString(sum[:])
}

// auditOwnerOf is the key of the owner replayctl_audit_owner reads from
// r's encoded body: its entry's ref, else its idempotency key, else none.
// A string is hashed as the body holds it (asJSON: invalid UTF-8 as
// encoding/json writes it, which is how audit's encoder writes it too).
// A body holding a NUL anywhere (the escape \u0000, in any field) is
// '?', as the function reads it: PostgreSQL's json refuses to turn that
// escape into text, so its parse fails, and the reads that compare the
// body's fields as json (ChainSucceeded) must not meet such a record in
// their index range.
func auditOwnerOf(r *audit.Record, body []byte) int64 {
	switch {
	case hasNULEscape(body):
		return ownerKey("?")
	case r.EntryRef != "":
		return ownerKey(refOwner(asJSON(r.EntryRef)))
	case r.Key != "":
		return ownerKey(keyOwner(asJSON(r.Key)))
	}
	return 0
}

// hasNULEscape says whether the JSON text b holds the escape \u0000,
// not a backslash escaped before "u0000".
func hasNULEscape(b []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			return false
		}
		i += j
		if i+5 < len(b) && b[i+1] == 'u' && string(b[i+2:i+6]) == "0000" {
			return true
		}
		i += 2 // the escaped character: a backslash escapes the next one
		if i >= len(b) {
			return false
		}
	}
}
