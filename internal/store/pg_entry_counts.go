package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Entry counters on PostgreSQL (issue 16, "reads independent of store
// size"). Counters, Series' inflow and a /metrics scrape grouped the whole
// entries table (about a row per entry: first_seen is in the key). Now a
// trigger keeps counter rows in entry_counts in the writing transaction,
// as bbolt keeps its counters bucket in the entry's: by cell (source,
// class, action, state), topic, first-seen day, failure signature, open
// (source, topic) and inflow (first-seen hour, class). A trigger rather
// than Go: an upsert does not know the row it replaces, the trigger sees
// OLD and NEW without another read. Rows are split in shards by the
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
	     AND (x.dim <> 'open' OR coalesce(d->>'status', '') NOT IN ('` + StatusReplayed + `', '` + StatusResolved + `'))
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

// pgEntryTriggers are created after the backfill (migrationSteps), so the
// backfill's own updates count nothing twice.
const pgEntryTriggers = `CREATE TRIGGER entries_count AFTER INSERT OR DELETE ON entries FOR EACH ROW EXECUTE FUNCTION replayctl_count_entry();
	 CREATE TRIGGER entries_recount AFTER UPDATE OF rec, sig, seen ON entries FOR EACH ROW
	   WHEN (OLD.rec IS DISTINCT FROM NEW.rec OR OLD.sig IS DISTINCT FROM NEW.sig OR OLD.seen IS DISTINCT FROM NEW.seen)
	   EXECUTE FUNCTION replayctl_count_entry();`

// entryCols are the columns computed in Go for a written entry.
type entryCols struct {
	sig            string
	seen, openSeen pgtype.Timestamptz
	state          string
	lastFailed     int64
}

func colsOf(r *EntryRecord) entryCols {
	c := entryCols{sig: Signature(r), state: r.Status, lastFailed: lastFailedKey(r)}
	if !r.FirstSeen.IsZero() {
		c.seen = pgtype.Timestamptz{Time: r.FirstSeen.UTC(), Valid: true}
		if IsOpen(r.Status) {
			c.openSeen = c.seen
		}
	}
	return c
}

// approvalCols are an approval's indexed columns: pending, requested_at.
func approvalCols(a *Approval) (bool, pgtype.Timestamptz) {
	return a.State == ApprovalPending, pgtype.Timestamptz{Time: a.RequestedAt.UTC(), Valid: true}
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
		var a Approval
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
	if _, err := tx.Exec(ctx, pgEntryTriggers); err != nil {
		return fmt.Errorf("create entry count triggers: %w", err)
	}
	return nil
}

// entryCounts reads the entry counters with at = -infinity, summed over
// shards, and calls fn for each non-zero one.
func (p *Postgres) entryCounts(ctx context.Context, fn func(dim string, key []string, n int64)) error {
	rows, err := p.pool.Query(ctx, `SELECT dim, key, sum(n)::bigint FROM entry_counts
		WHERE dim IN ('cell', 'topic', 'day', 'open') AND at = '-infinity' GROUP BY dim, key HAVING sum(n) <> 0`)
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
func (p *Postgres) cellsAndOpen(ctx context.Context, out *Counters) error {
	err := p.entryCounts(ctx, func(dim string, key []string, n int64) {
		switch {
		case dim == "cell" && len(key) == 4:
			out.Entries += n
			out.Cells = append(out.Cells, Cell{Source: key[0], Class: key[1], Action: key[2], State: key[3], N: n})
		case dim == "topic" && len(key) == 1:
			out.Topics[valKey(key[0])] += n
		case dim == "day" && len(key) == 1:
			out.Days[key[0]] += n
		case dim == "open" && len(key) == 2:
			out.Open = append(out.Open, Depth{Source: key[0], Topic: valKey(key[1]), N: n})
		}
	})
	if err != nil {
		return err
	}
	sort.Slice(out.Cells, func(i, j int) bool { return fmt.Sprint(out.Cells[i]) < fmt.Sprint(out.Cells[j]) })
	sort.Slice(out.Open, func(i, j int) bool { return fmt.Sprint(out.Open[i]) < fmt.Sprint(out.Open[j]) })
	return nil
}

// oldestOpen reads the first-seen time of the oldest open entry from the
// open_seen index. The column holds microseconds; the record's own time
// (nanoseconds) of the rows at that microsecond is the answer.
func (p *Postgres) oldestOpen(ctx context.Context) (time.Time, error) {
	rows, err := p.pool.Query(ctx, `SELECT coalesce(`+pgDoc+`->>'first_seen', '') FROM entries
		WHERE open_seen = (SELECT min(open_seen) FROM entries)`)
	if err != nil {
		return time.Time{}, fmt.Errorf("read oldest open entry: %w", err)
	}
	defer rows.Close()
	var oldest time.Time
	for rows.Next() {
		var seen string
		if err := rows.Scan(&seen); err != nil {
			return time.Time{}, err
		}
		if t, err := time.Parse(time.RFC3339Nano, seen); err == nil && !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t.UTC()
		}
	}
	return oldest, rows.Err()
}

// signatures reads the signature counters; each signature's example and
// its class are its smallest ref's, one probe of entries_sig each.
func (p *Postgres) signatures(ctx context.Context) ([]SignatureCount, error) {
	rows, err := p.pool.Query(ctx, `SELECT s.key[1], s.n, coalesce(e.ref, ''), coalesce(replayctl_doc(e.rec)->>'class', '')
		FROM (SELECT key, sum(n)::bigint AS n FROM entry_counts WHERE dim = 'sig' AND at = '-infinity' GROUP BY key HAVING sum(n) <> 0) s
		LEFT JOIN LATERAL (SELECT ref, rec FROM entries
		  WHERE md5(coalesce(sig, '')) = md5(s.key[1]) AND coalesce(sig, '') = s.key[1]
		  ORDER BY ref LIMIT 1) e ON true`)
	if err != nil {
		return nil, fmt.Errorf("read signature counters: %w", err)
	}
	defer rows.Close()
	out := []SignatureCount{}
	for rows.Next() {
		var sc SignatureCount
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

// Gauges reads a /metrics scrape's counts (as store.Bolt.Gauges): the
// cell and open-depth counters and the oldest open entry from its index.
func (p *Postgres) Gauges(ctx context.Context) (*Gauges, error) {
	c := &Counters{Topics: map[string]int64{}, Days: map[string]int64{}}
	if err := p.cellsAndOpen(ctx, c); err != nil {
		return nil, err
	}
	oldest, err := p.oldestOpen(ctx)
	if err != nil {
		return nil, err
	}
	return &Gauges{Cells: c.Cells, Open: c.Open, OldestOpen: oldest}, nil
}

// PendingApprovals calls fn with the open approval requests, oldest
// first (ties by id, in byte order as bbolt's index), from their partial
// index: a scrape reads the open ones, not every request ever made.
func (p *Postgres) PendingApprovals(ctx context.Context, fn func(*Approval) error) error {
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
		var a Approval
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
func (p *Postgres) inflowHours(ctx context.Context, from, to time.Time, hour func(time.Time) *HourCount) error {
	err := p.hourCounts(ctx, `SELECT at, key[1], sum(n)::bigint FROM entry_counts
		WHERE dim = 'inflow' AND at >= $1 AND at <= $2 GROUP BY at, key HAVING sum(n) <> 0`, from, to,
		func(at time.Time, class string, n int64) {
			if h := hour(at); h != nil {
				h.Inflow += n
				h.addClass(&h.InflowByClass, class, n)
			}
		})
	if err != nil {
		return fmt.Errorf("read inflow counters: %w", err)
	}
	return nil
}
