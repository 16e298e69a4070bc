package postgres

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"

	"github.com/replayctl/replayctl/internal/audit"
)

// The owner of an audit record as a column (schema version 20, issue 33).
// Migration 12 indexed each record under replayctl_audit_owner(body), an
// expression: every record inserted ran a PL/pgSQL function that parsed
// its JSON inside an exception block (a subtransaction), and so did every
// sealer's update of a record that left its page. By perf over 4 workers
// that was ~3% of PostgreSQL's CPU, ~35 µs a replay of three records. The
// writer knows the record it encodes, so it writes the same value as a
// plain column (auditOwnerOf) and the index is on the column; the reads
// (EntryAudit, ChainSucceeded, lastAuditTimes) compare the column with
// what they compared the expression with.
//
// A row inserted without the column (a replayctl older than version 20
// still running during the upgrade, which checked the version when it
// started; a row inserted outside replayctl) gets it from its body by a
// BEFORE trigger, whose WHEN clause skips the rows that have it before any
// function runs; so does a row whose body is rewritten (never by
// replayctl: a forgery, which the chain's verification reports, is
// indexed under what it now says, as the expression indexed it). The
// older binary's own reads still spell the expression: they keep their
// answers, without an index. A record naming neither an entry nor a key
// is indexed under the empty string (NULL for the expression), which no read asks for.
const pgAuditOwnerMigration = `ALTER TABLE audit ADD COLUMN owner text;
	 UPDATE audit SET owner = coalesce(replayctl_audit_owner(body), '');
	 CREATE FUNCTION replayctl_audit_owner_col() RETURNS trigger LANGUAGE plpgsql AS $$
	 BEGIN
	   NEW.owner := coalesce(replayctl_audit_owner(NEW.body), '');
	   RETURN NEW;
	 END $$;
	 CREATE TRIGGER audit_owner_ins BEFORE INSERT ON audit FOR EACH ROW
	   WHEN (NEW.owner IS NULL) EXECUTE FUNCTION replayctl_audit_owner_col();
	 CREATE TRIGGER audit_owner_upd BEFORE UPDATE OF body ON audit FOR EACH ROW
	   EXECUTE FUNCTION replayctl_audit_owner_col();
	 CREATE INDEX audit_owner_col ON audit (owner, seq);
	 DROP INDEX audit_owner;`

// auditOwnerOf is what replayctl_audit_owner reads from r's encoded
// body: 'r' and the md5 of its entry's ref, else 'k' and the md5 of its
// idempotency key, else the empty string (the function's NULL). A string is hashed as
// the body holds it (asJSON: invalid UTF-8 as encoding/json writes it,
// which is how audit's encoder writes it too). A body holding a NUL
// anywhere (the escape \u0000, in any field) is '?', as the function
// reads it: PostgreSQL's json refuses to turn that escape into text, so
// its parse fails, and the reads that compare the body's fields as json
// (ChainSucceeded) must not meet such a record in their index range.
func auditOwnerOf(r *audit.Record, body []byte) string {
	switch {
	case hasNULEscape(body):
		return "?"
	case r.EntryRef != "":
		return auditOwner(asJSON(r.EntryRef))
	case r.Key != "":
		sum := md5.Sum([]byte(asJSON(r.Key)))
		return "k" + hex.EncodeToString(sum[:])
	}
	return ""
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
