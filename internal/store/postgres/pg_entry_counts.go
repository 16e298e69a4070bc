package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/group"
	"github.com/replayctl/replayctl/internal/store"
)

// Entry counters on PostgreSQL (issue 16, "reads independent of store
// size"). Counters, Series' inflow and a /metrics scrape grouped the whole
// entries table (about a row per entry: first_seen is in the key). Now
// counter rows in entry_counts are kept in the writing transaction, as
// bbolt keeps its counters bucket in the entry's: by cell (source,
// class, action, state), topic, first-seen day, failure signature, open
// (source, topic) and inflow (first-seen hour, class). Schema version 8
// kept them by a trigger (it sees OLD and NEW without another read);
// since version 9 the writing transaction counts in Go from the row it
// holds locked ("Counting in Go" below), and the trigger counts only an
// older replayctl's writes. Rows are split in shards by the
// writing backend's pid, as audit_counts (pg_counts.go), so writers do not
// queue on one hot row; a read sums the shards. Two writers on one shard
// that touch two counter rows in opposite orders can deadlock: PostgreSQL
// aborts one (40P01) and Update and Ingest run it again.
//
// The signature (Signature, Go regexps) and the first-seen time are
// computed in Go at write time into columns sig and seen; open_seen is
// seen while the entry is open, under a partial index, so the oldest open
// entry is an index probe. Approvals get pending and requested_at, under a
// partial index, so the open requests are read without the others.
//
// Counter keys are hashed into the primary key (kh), and signatures into
// entries_sig (md5: the probe compares the signature too), so a long topic
// or signature never passes the btree's row size limit.
//
// state and last_failed order sorted pages (pg_sorted.go).
const pgEntryCountsMigration = `ALTER TABLE entries ADD COLUMN sig text, ADD COLUMN seen timestamptz, ADD COLUMN open_seen timestamptz,
	   ADD COLUMN state text, ADD COLUMN last_failed bigint;
	 CREATE INDEX entries_last_failed ON entries (state, last_failed, ref COLLATE ucs_basic);
	 CREATE INDEX entries_sig ON entries (md5(coalesce(sig, '')), ref);
	 CREATE INDEX entries_open_seen ON entries (open_seen) WHERE open_seen IS NOT NULL;
	 ALTER TABLE approvals ADD COLUMN pending boolean NOT NULL DEFAULT false, ADD COLUMN requested_at timestamptz;
	 CREATE INDEX approvals_pending ON approvals (requested_at, id COLLATE ucs_basic) WHERE pending;
	 CREATE TABLE entry_counts (dim text NOT NULL, at timestamptz NOT NULL, kh bytea NOT NULL, key text[] NOT NULL,
	   shard int NOT NULL, n bigint NOT NULL, PRIMARY KEY (dim, at, kh, shard));
	 -- The counter keys of one entry row; at is -infinity but for inflow.
	 CREATE FUNCTION replayctl_entry_keys(rec bytea, sig text, seen timestamptz) RETURNS TABLE (dim text, at timestamptz, key text[])
	 LANGUAGE sql STABLE AS $$
	   SELECT x.dim, x.at, x.key FROM (SELECT replayctl_doc(rec) AS d) d, LATERAL (VALUES
	     ('cell', '-infinity'::timestamptz, ARRAY[coalesce(d->'entry'->>'source', ''), coalesce(d->>'class', ''), coalesce(d->>'action', ''), coalesce(d->>'status', '')]),
	     ('topic', '-infinity', ARRAY[coalesce(d->'entry'->>'topic', '')]),
	     ('day', '-infinity', ARRAY[coalesce(to_char(seen AT TIME ZONE 'UTC', 'YYYY-MM-DD'), '0001-01-01')]),
	     ('sig', '-infinity', ARRAY[coalesce(sig, '')]),
	     ('inflow', date_trunc('hour', seen AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', ARRAY[coalesce(d->>'class', '')]),
	     ('open', '-infinity', ARRAY[coalesce(d->'entry'->>'source', ''), coalesce(d->'entry'->>'topic', '')])
	   ) AS x(dim, at, key)
	   WHERE (x.dim <> 'inflow' OR seen IS NOT NULL)
	     AND (x.dim <> 'open' OR coalesce(d->>'status', '') NOT IN ('` + store.StatusReplayed + `', '` + store.StatusResolved + `'))
	 $$;
	 -- What a row change adds to the counters: the new row's keys minus the
	 -- old row's, none when they are the same (most writes: a decision that
	 -- keeps the cell), in key order.
	 CREATE FUNCTION replayctl_count_entry() RETURNS trigger LANGUAGE plpgsql AS $$
	 BEGIN
	   INSERT INTO entry_counts (dim, at, kh, key, shard, n)
	   SELECT c.dim, c.at, sha256(convert_to(c.key::text, 'UTF8')), c.key, pg_backend_pid() % ` + "16" + `, sum(c.delta)
	   FROM (SELECT k.*, -1 AS delta FROM replayctl_entry_keys(OLD.rec, OLD.sig, OLD.seen) k WHERE TG_OP <> 'INSERT'
	         UNION ALL
	         SELECT k.*, 1 FROM replayctl_entry_keys(NEW.rec, NEW.sig, NEW.seen) k WHERE TG_OP <> 'DELETE') c
	   GROUP BY c.dim, c.at, c.key HAVING sum(c.delta) <> 0
	   ORDER BY 1, 2, 3
	   ON CONFLICT (dim, at, kh, shard) DO UPDATE SET n = entry_counts.n + excluded.n;
	   RETURN NULL;
	 END $$;`

// pgEntryTriggersV8 are the triggers as migration 8 created them, after
// its backfill (migrationSteps), so the backfill's own updates count
// nothing twice. A shipped migration never changes meaning: version 9
// replaces them (pgEntryTriggers).
const pgEntryTriggersV8 = `CREATE TRIGGER entries_count AFTER INSERT OR DELETE ON entries FOR EACH ROW EXECUTE FUNCTION replayctl_count_entry();
	 CREATE TRIGGER entries_recount AFTER UPDATE OF rec, sig, seen ON entries FOR EACH ROW
	   WHEN (OLD.rec IS DISTINCT FROM NEW.rec OR OLD.sig IS DISTINCT FROM NEW.sig OR OLD.seen IS DISTINCT FROM NEW.seen)
	   EXECUTE FUNCTION replayctl_count_entry();`

// pgEntryTriggers (migration 9) count only the writes of a transaction
// that does not count in Go (countsInGo): a replayctl older than version
// 9 still running while a newer one migrated the schema (it checked the
// version when it started) goes on counting through them, and a newer one
// does not pay for them: the WHEN clause is evaluated before any function
// is called. DROP and CREATE rather than CREATE OR REPLACE TRIGGER, which
// needs PostgreSQL 14; both run in the migration's transaction, so no
// write falls between them.
const pgEntryTriggers = `DROP TRIGGER IF EXISTS entries_count ON entries;
	 DROP TRIGGER IF EXISTS entries_recount ON entries;
	 CREATE TRIGGER entries_count AFTER INSERT OR DELETE ON entries FOR EACH ROW
	   WHEN (current_setting('` + countsInGoSetting + `', true) IS DISTINCT FROM 'on')
	   EXECUTE FUNCTION replayctl_count_entry();
	 CREATE TRIGGER entries_recount AFTER UPDATE OF rec, sig, seen ON entries FOR EACH ROW
	   WHEN (current_setting('` + countsInGoSetting + `', true) IS DISTINCT FROM 'on'
	     AND (OLD.rec IS DISTINCT FROM NEW.rec OR OLD.sig IS DISTINCT FROM NEW.sig OR OLD.seen IS DISTINCT FROM NEW.seen))
	   EXECUTE FUNCTION replayctl_count_entry();`

// countsInGoSetting is set (for its transaction only) by a transaction
// that writes entries and counts them itself.
const countsInGoSetting = "replayctl.counts_in_go"

// setCountsInGo also says that the transaction writes the entries'
// filter columns (pg_entry_cols.go): one statement for both.
const setCountsInGo = `SELECT set_config('` + countsInGoSetting + `', 'on', true), set_config('` + colsInGoSetting + `', 'on', true)`

// entryCols are the columns computed in Go for a written entry. class,
// action, source and topic are the record's values as its stored JSON
// reads them (pg_entry_cols.go).
type entryCols struct {
	sig                          string
	seen, openSeen               pgtype.Timestamptz
	state                        string
	lastFailed                   int64
	class, action, source, topic string
	grp                          string // the failure group (pg_groups.go)
}

// entryColNames are entryCols' columns, in the order values gives them.
var entryColNames = []string{"sig", "seen", "open_seen", "state", "last_failed", "class", "action", "source", "topic", "grp"}

// values are the parameters of an entry write (entryWriteSQL): head (the
// key, the record, the payload if written), then c's columns.
func (c *entryCols) values(head ...any) []any {
	return append(head, c.sig, c.seen, c.openSeen, c.state, c.lastFailed, c.class, c.action, c.source, c.topic, c.grp)
}

func colsOf(r *store.EntryRecord) entryCols {
	c := entryCols{sig: pgText(store.Signature(r)), state: r.Status, lastFailed: lastFailedKey(r),
		class: pgText(string(r.Class)), action: pgText(string(r.Action)), source: pgText(r.Entry.Source), topic: pgText(r.Entry.Topic),
		grp: store.GroupID(r)}
	if !r.FirstSeen.IsZero() {
		c.seen = pgtype.Timestamptz{Time: r.FirstSeen.UTC(), Valid: true}
		if store.IsOpen(r.Status) {
			c.openSeen = c.seen
		}
	}
	return c
}

// approvalCols are an approval's indexed columns: pending, requested_at.
func approvalCols(a *store.Approval) (bool, pgtype.Timestamptz) {
	return a.State == store.ApprovalPending, pgtype.Timestamptz{Time: a.RequestedAt.UTC(), Valid: true}
}

// backfillEntryCounts fills the columns of the rows written before them,
// counts every row once, then creates the triggers; in the migration's
// transaction (under the migration lock).
func backfillEntryCounts(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `DECLARE backfill_entries NO SCROLL CURSOR FOR SELECT ref, rec FROM entries`); err != nil {
		return fmt.Errorf("backfill entry columns: %w", err)
	}
	for {
		rows, err := tx.Query(ctx, `FETCH 1000 FROM backfill_entries`)
		if err != nil {
			return fmt.Errorf("backfill entry columns: %w", err)
		}
		var refs, sigs, states []string
		var seens, opens []pgtype.Timestamptz
		var lfs []int64
		for rows.Next() {
			var ref string
			var rec []byte
			if err := rows.Scan(&ref, &rec); err != nil {
				rows.Close()
				return err
			}
			er, err := decodeEntryBytes(rec, nil)
			if err != nil {
				rows.Close()
				return fmt.Errorf("backfill entry columns: decode entry %q: %w", ref, err)
			}
			c := colsOf(er)
			refs, sigs, seens, opens = append(refs, ref), append(sigs, c.sig), append(seens, c.seen), append(opens, c.openSeen)
			states, lfs = append(states, c.state), append(lfs, c.lastFailed)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(refs) == 0 {
			break
		}
		if _, err := tx.Exec(ctx, `UPDATE entries e SET sig = u.sig, seen = u.seen, open_seen = u.open_seen, state = u.state, last_failed = u.lf
			FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::bigint[]) AS u(ref, sig, seen, open_seen, state, lf)
			WHERE e.ref = u.ref`, refs, sigs, seens, opens, states, lfs); err != nil {
			return fmt.Errorf("backfill entry columns: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, `CLOSE backfill_entries`); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT id, rec FROM approvals`)
	if err != nil {
		return fmt.Errorf("backfill approval columns: %w", err)
	}
	var ids []string
	var pendings []bool
	var ats []pgtype.Timestamptz
	for rows.Next() {
		var id string
		var rec []byte
		if err := rows.Scan(&id, &rec); err != nil {
			rows.Close()
			return err
		}
		var a store.Approval
		if err := json.Unmarshal(rec, &a); err != nil {
			rows.Close()
			return fmt.Errorf("backfill approval columns: decode approval %q: %w", id, err)
		}
		pend, at := approvalCols(&a)
		ids, pendings, ats = append(ids, id), append(pendings, pend), append(ats, at)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE approvals a SET pending = u.pending, requested_at = u.at
		FROM unnest($1::text[], $2::bool[], $3::timestamptz[]) AS u(id, pending, at) WHERE a.id = u.id`, ids, pendings, ats); err != nil {
		return fmt.Errorf("backfill approval columns: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO entry_counts (dim, at, kh, key, shard, n)
		SELECT k.dim, k.at, sha256(convert_to(k.key::text, 'UTF8')), k.key, 0, count(*)
		FROM entries e, LATERAL replayctl_entry_keys(e.rec, e.sig, e.seen) k GROUP BY k.dim, k.at, k.key`); err != nil {
		return fmt.Errorf("count entries: %w", err)
	}
	if _, err := tx.Exec(ctx, pgEntryTriggersV8); err != nil {
		return fmt.Errorf("create entry count triggers: %w", err)
	}
	return nil
}

// entryCounts reads the entry counters of dims with at = -infinity, summed over
// shards, and calls fn for each non-zero one.
func (p *Postgres) entryCounts(ctx context.Context, dims []string, fn func(dim string, key []string, n int64)) error {
	rows, err := p.pool.Query(ctx, `SELECT dim, key, sum(n)::bigint FROM entry_counts
		WHERE dim = ANY($1) AND at = '-infinity' GROUP BY dim, key HAVING sum(n) <> 0`, dims)
	if err != nil {
		return fmt.Errorf("read entry counters: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var dim string
		var key []string
		var n int64
		if err := rows.Scan(&dim, &key, &n); err != nil {
			return err
		}
		fn(dim, key, n)
	}
	return rows.Err()
}

// cellsAndOpen reads the cell and open-depth counters, sorted as
// Counters always returned them.
func (p *Postgres) cellsAndOpen(ctx context.Context, out *store.Counters) error {
	err := p.entryCounts(ctx, []string{"cell", "topic", "day", "open"}, func(dim string, key []string, n int64) {
		switch {
		case dim == "cell" && len(key) == 4:
			out.Entries += n
			out.Cells = append(out.Cells, store.Cell{Source: key[0], Class: key[1], Action: key[2], State: key[3], N: n})
		case dim == "topic" && len(key) == 1:
			out.Topics[store.ValKey(key[0])] += n
		case dim == "day" && len(key) == 1:
			out.Days[key[0]] += n
		case dim == "open" && len(key) == 2:
			out.Open = append(out.Open, store.Depth{Source: key[0], Topic: store.ValKey(key[1]), N: n})
		}
	})
	if err != nil {
		return err
	}
	sortByPrint(out.Cells)
	sortByPrint(out.Open)
	return nil
}

// signatures reads the signature counters; each signature's example and
// its class are its smallest ref's, one probe of entries_sig each.
func (p *Postgres) signatures(ctx context.Context) ([]store.SignatureCount, error) {
	rows, err := p.pool.Query(ctx, `SELECT s.key[1], s.n, coalesce(e.ref, ''), coalesce(e.class, '')
		FROM (SELECT key, sum(n)::bigint AS n FROM entry_counts WHERE dim = 'sig' AND at = '-infinity' GROUP BY key HAVING sum(n) <> 0) s
		LEFT JOIN LATERAL (SELECT ref, class FROM entries
		  WHERE md5(coalesce(sig, '')) = md5(s.key[1]) AND coalesce(sig, '') = s.key[1]
		  ORDER BY ref LIMIT 1) e ON true`)
	if err != nil {
		return nil, fmt.Errorf("read signature counters: %w", err)
	}
	defer rows.Close()
	out := []store.SignatureCount{}
	for rows.Next() {
		var sc store.SignatureCount
		if err := rows.Scan(&sc.Signature, &sc.N, &sc.Example, &sc.Class); err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.N != b.N {
			return a.N > b.N
		}
		return a.Signature < b.Signature
	})
	return out, nil
}

// Gauges reads a /metrics scrape's counts (as bolt.Bolt.Gauges): the
// cell and open-depth counters and the oldest open entry from its index.
func (p *Postgres) Gauges(ctx context.Context) (*store.Gauges, error) {
	return p.gauges(ctx) // one statement (postgres_index.go)
}

// PendingApprovals calls fn with the open approval requests, oldest
// first (ties by id, in byte order as bbolt's index), from their partial
// index: a scrape reads the open ones, not every request ever made.
func (p *Postgres) PendingApprovals(ctx context.Context, fn func(*store.Approval) error) error {
	rows, err := p.pool.Query(ctx, `SELECT rec FROM approvals WHERE pending ORDER BY requested_at, id COLLATE ucs_basic`)
	if err != nil {
		return fmt.Errorf("read pending approvals: %w", err)
	}
	var recs [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return err
		}
		recs = append(recs, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, b := range recs {
		var a store.Approval
		if err := json.Unmarshal(b, &a); err != nil {
			return fmt.Errorf("decode approval: %w", err)
		}
		if err := fn(&a); err != nil {
			return err
		}
	}
	return nil
}

// inflowHours reads the inflow counters of the hours from..to.
func (p *Postgres) inflowHours(ctx context.Context, from, to time.Time, hour func(time.Time) *store.HourCount) error {
	err := p.hourCounts(ctx, `SELECT at, key[1], sum(n)::bigint FROM entry_counts
		WHERE dim = 'inflow' AND at >= $1 AND at <= $2 GROUP BY at, key HAVING sum(n) <> 0`, from, to,
		func(at time.Time, class string, n int64) {
			if h := hour(at); h != nil {
				h.Inflow += n
				h.AddClass(&h.InflowByClass, class, n)
			}
		})
	if err != nil {
		return fmt.Errorf("read inflow counters: %w", err)
	}
	return nil
}

// Counting in Go (schema version 9). The trigger cost every entry write
// two JSON parses and an upsert per changed counter row (35-40% of a
// PostgreSQL write). A transaction knows the row it replaces (the fence
// check read it locked, or PutEntry reads it locked) and the values it
// writes, so it adds up the changes itself (entryKeys.add) and sends them
// with COMMIT in one statement (entryCountsWrite, commitWrites), rows in the trigger's
// order and under the trigger's keys: rows counted by a trigger (an older
// replayctl) and rows counted here are the same rows.

// entryKeys are the values an entry row is counted by, as
// replayctl_entry_keys reads them from the stored row.
type entryKeys struct {
	source, class, action, status, topic, sig string
	seen                                      pgtype.Timestamptz
	grp                                       string
}

// entryCountKey is one counter row: hour is the inflow hour (Unix
// seconds), noHour for the other dimensions (-infinity).
type entryCountKey struct {
	dim  string
	hour int64
	key  [4]string
	n    int8
}

const noHour = math.MinInt64

// keysOf are the keys of r as written with its columns c. A string that
// is not valid UTF-8 is counted as encoding/json stores it (each bad byte
// becomes U+FFFD), since the trigger read the stored JSON.
func keysOf(r *store.EntryRecord, c entryCols) entryKeys {
	return entryKeys{source: c.source, class: c.class, action: c.action,
		status: pgText(r.Status), topic: c.topic, sig: c.sig, seen: c.seen, grp: c.grp}
}

// pgText is s as a text column or a counter key can hold it: as asJSON
// reads it, and a NUL, which is valid UTF-8 and valid JSON (\u0000) but
// which PostgreSQL's text refuses ("invalid byte sequence for encoding
// UTF8: 0x00": the whole Ingest batch failed on one such entry), as
// U+FFFD. The record keeps the value exactly; only what the filters,
// counters and failure signatures compare is replaced.
func pgText(s string) string {
	s = asJSON(s)
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

func asJSON(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

// countedFields are the stored record's fields the counters read.
type countedFields struct {
	Entry struct {
		Source string `json:"source"`
		Topic  string `json:"topic"`
		// What the entry's failure group is computed from (GroupID).
		ReasonCode  string `json:"reason_code"`
		Message     string `json:"message"`
		DecodeError string `json:"decode_error"`
		State       struct {
			ErrorSignature string `json:"error_signature"`
		} `json:"source_state"`
	} `json:"entry"`
	Status string `json:"status"`
	Class  string `json:"class"`
	Action string `json:"action"`
	// Group is the recorded signature (EntryRecord.Group), when any.
	Group *group.Key `json:"group"`
}

// groupID is the failure group of the stored record, as GroupID computed
// it from the record written.
func (f *countedFields) groupID() string {
	if f.Group != nil {
		return f.Group.ID()
	}
	e := entry.Entry{Source: f.Entry.Source, Topic: f.Entry.Topic, ReasonCode: f.Entry.ReasonCode, Message: f.Entry.Message,
		DecodeError: f.Entry.DecodeError, State: entry.SourceState{ErrorSignature: f.Entry.State.ErrorSignature}}
	return group.IDOf(&e, f.Class)
}

// storedKeys are the keys of a stored row: its record and its sig and
// seen columns (NULL in neither after the migration to version 8's
// backfill; NULL counts as an empty signature and no time, as in the
// trigger).
func storedKeys(rec []byte, sig *string, seen pgtype.Timestamptz) (entryKeys, error) {
	var f countedFields
	if err := json.Unmarshal(rec, &f); err != nil {
		return entryKeys{}, fmt.Errorf("decode stored entry: %w", err)
	}
	// As keysOf counted them when the row was written (pgText: a NUL is
	// stored in the record, not in a key).
	k := entryKeys{source: pgText(f.Entry.Source), class: pgText(f.Class), action: pgText(f.Action), status: pgText(f.Status),
		topic: pgText(f.Entry.Topic), seen: seen}
	if sig != nil {
		k.sig = *sig
	}
	k.grp = f.groupID()
	return k, nil
}

// each calls fn with every counter row k counts in (replayctl_entry_keys).
func (k *entryKeys) each(fn func(entryCountKey)) {
	fn(entryCountKey{dim: "cell", hour: noHour, key: [4]string{k.source, k.class, k.action, k.status}, n: 4})
	fn(entryCountKey{dim: "topic", hour: noHour, key: [4]string{k.topic}, n: 1})
	day := "0001-01-01"
	if k.seen.Valid {
		day = k.seen.Time.UTC().Format("2006-01-02")
	}
	fn(entryCountKey{dim: "day", hour: noHour, key: [4]string{day}, n: 1})
	fn(entryCountKey{dim: "sig", hour: noHour, key: [4]string{k.sig}, n: 1})
	if k.seen.Valid {
		t := k.seen.Time.UTC()
		h := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, time.UTC)
		fn(entryCountKey{dim: "inflow", hour: h.Unix(), key: [4]string{k.class}, n: 1})
	}
	if store.IsOpen(k.status) {
		fn(entryCountKey{dim: "open", hour: noHour, key: [4]string{k.source, k.topic}, n: 2})
	}
	k.eachGroup(fn)
}

// entryDelta is what a transaction's entry writes add to the counters.
type entryDelta map[entryCountKey]int64

// add counts a row replaced: from old (nil: there was none) to new.
func (d entryDelta) add(old, new *entryKeys) {
	if old != nil && new != nil && *old == *new {
		return // most writes: a decision, a claim's outcome in the same cell
	}
	if old != nil {
		old.each(func(k entryCountKey) { d[k]-- })
	}
	if new != nil {
		new.each(func(k entryCountKey) { d[k]++ })
	}
}

// entryCountsSQL adds counter rows given as arrays (entryDelta.arrays),
// each key hashed as the trigger hashes it, in the trigger's row order
// (dim, at, kh): two transactions on one shard lock their rows in one
// order.
const entryCountsSQL = `INSERT INTO entry_counts (dim, at, kh, key, shard, n)
	SELECT u.dim, u.at, sha256(convert_to(k.key::text, 'UTF8')), k.key, pg_backend_pid() % ` + "16" + `, u.n
	FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::bigint[])
	  AS u(dim, at, k1, k2, k3, k4, len, n),
	  LATERAL (SELECT (ARRAY[u.k1, u.k2, u.k3, u.k4])[1:u.len] AS key) k
	ORDER BY 1, 2, 3
	ON CONFLICT (dim, at, kh, shard) DO UPDATE SET n = entry_counts.n + excluded.n`

// countRows are counter rows as entryCountsSQL's arrays, each tagged
// with an entry's ref for Ingest.
type countRows struct {
	refs, dims, k1, k2, k3, k4 []string
	ats                        []pgtype.Timestamptz
	lens                       []int32
	ns                         []int64
}

// appendTo adds the non-zero rows of d to rows, tagged with ref.
func (d entryDelta) appendTo(rows *countRows, ref string) {
	for k, n := range d {
		if n == 0 {
			continue
		}
		at := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
		if k.hour != noHour {
			at = pgtype.Timestamptz{Time: time.Unix(k.hour, 0).UTC(), Valid: true}
		}
		rows.refs, rows.dims, rows.ats = append(rows.refs, ref), append(rows.dims, k.dim), append(rows.ats, at)
		rows.lens, rows.ns = append(rows.lens, int32(k.n)), append(rows.ns, n)
		rows.k1, rows.k2 = append(rows.k1, k.key[0]), append(rows.k2, k.key[1])
		rows.k3, rows.k4 = append(rows.k3, k.key[2]), append(rows.k4, k.key[3])
	}
}

// args are entryCountsSQL's arguments.
func (rows *countRows) args() []any {
	return []any{rows.dims, rows.ats, rows.k1, rows.k2, rows.k3, rows.k4, rows.lens, rows.ns}
}

// countEntry notes a write of an entry, from old to new, and says (once
// per transaction, before its first entry write) that this transaction
// counts its writes itself, so the trigger left for older binaries skips
// them.
func (t *pgTx) countEntry(old, new *entryKeys) {
	if t.entryDelta == nil {
		t.entryDelta = entryDelta{}
		t.queue("count entries in Go", nil, setCountsInGo)
	}
	t.entryDelta.add(old, new)
}

// entryCountsWrite is the statement adding the transaction's entry
// counts, for COMMIT (commitWrites); none when they did not change.
func (t *pgTx) entryCountsWrite() (commitWrite, bool) {
	var rows countRows
	t.entryDelta.appendTo(&rows, "")
	t.entryDelta = nil
	if len(rows.dims) == 0 {
		return commitWrite{}, false
	}
	return commitWrite{sql: entryCountsSQL, args: rows.args()}, true
}
