package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/replayctl/replayctl/internal/store"
)

// Groups on PostgreSQL (schema version 15). The group id is a column
// written from Go with the other filter columns (colsOf), indexed with
// the first-seen time, so a group's first and newest entry are index
// probes; its counters are entry_counts rows counted in the writing
// transaction like the others (entryKeys.eachGroup):
//
//	group   [id]  entries of the group
//	gopen   [id]  its open entries
//	ginflow [id]  at the first-seen hour: inflow per hour
//
// The trigger left for a replayctl older than version 9 does not count
// groups; one still writing after this migration leaves its writes out of
// the group counters until the next backfill (none: upgrade it).
const pgGroupsMigration = `ALTER TABLE entries ADD COLUMN grp text;
	 CREATE INDEX entries_grp ON entries (grp, seen, ref) WHERE grp IS NOT NULL;
	 CREATE TABLE entry_groups (id text PRIMARY KEY, rec bytea NOT NULL);`

// eachGroup calls fn with the group counter rows of k.
func (k *entryKeys) eachGroup(fn func(entryCountKey)) {
	if k.grp == "" {
		return
	}
	fn(entryCountKey{dim: "group", hour: noHour, key: [4]string{k.grp}, n: 1})
	if store.IsOpen(k.status) {
		fn(entryCountKey{dim: "gopen", hour: noHour, key: [4]string{k.grp}, n: 1})
	}
	if k.seen.Valid {
		t := k.seen.Time.UTC()
		h := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, time.UTC)
		fn(entryCountKey{dim: "ginflow", hour: h.Unix(), key: [4]string{k.grp}, n: 1})
	}
}

// backfillGroups sets the group column of every row and counts the rows'
// group counters once, in the migration's transaction.
func backfillGroups(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `DECLARE backfill_groups NO SCROLL CURSOR FOR SELECT ref, rec, sig, seen FROM entries`); err != nil {
		return fmt.Errorf("backfill groups: %w", err)
	}
	for {
		rows, err := tx.Query(ctx, `FETCH 1000 FROM backfill_groups`)
		if err != nil {
			return fmt.Errorf("backfill groups: %w", err)
		}
		var refs, grps []string
		delta := entryDelta{}
		for rows.Next() {
			var ref string
			var rec []byte
			var sig *string
			var seen pgtype.Timestamptz
			if err := rows.Scan(&ref, &rec, &sig, &seen); err != nil {
				rows.Close()
				return err
			}
			k, err := storedKeys(rec, sig, seen)
			if err != nil {
				rows.Close()
				return fmt.Errorf("backfill groups: entry %q: %w", ref, err)
			}
			refs, grps = append(refs, ref), append(grps, k.grp)
			k.eachGroup(func(c entryCountKey) { delta[c]++ })
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(refs) == 0 {
			break
		}
		if _, err := tx.Exec(ctx, `UPDATE entries e SET grp = u.grp FROM unnest($1::text[], $2::text[]) AS u(ref, grp) WHERE e.ref = u.ref`,
			refs, grps); err != nil {
			return fmt.Errorf("backfill groups: %w", err)
		}
		var cr countRows
		delta.appendTo(&cr, "")
		if _, err := tx.Exec(ctx, entryCountsSQL, cr.args()...); err != nil {
			return fmt.Errorf("backfill group counters: %w", err)
		}
	}
	_, err := tx.Exec(ctx, `CLOSE backfill_groups`)
	return err
}

// Groups lists the groups with entries, largest open count first.
func (p *Postgres) Groups(ctx context.Context, now time.Time, limit int) ([]store.GroupSummary, error) {
	byID := map[string]*store.GroupSummary{}
	var ids []string
	err := p.entryCounts(ctx, []string{"group", "gopen"}, func(dim string, key []string, n int64) {
		if len(key) != 1 {
			return
		}
		g := byID[key[0]]
		if g == nil {
			g = &store.GroupSummary{ID: key[0]}
			byID[key[0]] = g
			ids = append(ids, key[0])
		}
		if dim == "group" {
			g.Total = n
		} else {
			g.Open = n
		}
	})
	if err != nil {
		return nil, err
	}
	all := make([]store.GroupSummary, 0, len(ids))
	for _, id := range ids {
		all = append(all, *byID[id])
	}
	top := store.TopGroups(all, limit)
	ids = ids[:0]
	for _, g := range top {
		ids = append(ids, g.ID)
	}
	if err := p.groupDetails(ctx, ids, byID, now); err != nil {
		return nil, err
	}
	out := make([]store.GroupSummary, 0, len(ids))
	for _, id := range ids {
		out = append(out, *byID[id])
	}
	return out, nil
}

// Group reads one group.
func (p *Postgres) Group(ctx context.Context, id string, now time.Time) (*store.GroupSummary, error) {
	g := &store.GroupSummary{ID: id}
	rows, err := p.pool.Query(ctx, `SELECT dim, sum(n)::bigint FROM entry_counts
		WHERE dim IN ('group', 'gopen') AND at = '-infinity' AND key = ARRAY[$1::text] GROUP BY dim`, id)
	if err != nil {
		return nil, fmt.Errorf("read group counters: %w", err)
	}
	for rows.Next() {
		var dim string
		var n int64
		if err := rows.Scan(&dim, &n); err != nil {
			rows.Close()
			return nil, err
		}
		if dim == "group" {
			g.Total = n
		} else {
			g.Open = n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := p.groupDetails(ctx, []string{id}, map[string]*store.GroupSummary{id: g}, now); err != nil {
		return nil, err
	}
	if g.Total == 0 && g.Lifecycle == nil {
		return nil, store.ErrNotFound
	}
	return g, nil
}

// groupDetails reads the groups' trend, first and newest entry (index
// probes of entries_grp) and lifecycle records, in three statements.
func (p *Postgres) groupDetails(ctx context.Context, ids []string, byID map[string]*store.GroupSummary, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	hours := store.TrendHours(now)
	slot := map[int64]int{}
	for i, h := range hours {
		slot[h.Unix()] = i
	}
	for _, id := range ids {
		byID[id].Hourly = make([]int64, len(hours))
	}
	err := p.hourCounts(ctx, `SELECT at, key[1], sum(n)::bigint FROM entry_counts
		WHERE dim = 'ginflow' AND at >= $1 AND at <= $2 GROUP BY at, key HAVING sum(n) <> 0`, hours[0], hours[len(hours)-1],
		func(at time.Time, id string, n int64) {
			if g, i, ok := byID[id], 0, false; g != nil && g.Hourly != nil { // only the groups asked for
				if i, ok = slot[at.Unix()]; ok {
					g.Hourly[i] += n
				}
			}
		})
	if err != nil {
		return fmt.Errorf("read group inflow: %w", err)
	}
	samples := map[string]*store.EntryRecord{}
	rows, err := p.pool.Query(ctx, `SELECT g.id, (SELECT min(seen) FROM entries WHERE grp = g.id), s.seen, s.rec
		FROM unnest($1::text[]) AS g(id)
		LEFT JOIN LATERAL (SELECT seen, rec FROM entries WHERE grp = g.id AND seen IS NOT NULL ORDER BY seen DESC, ref DESC LIMIT 1) s ON true`, ids)
	if err != nil {
		return fmt.Errorf("read groups: %w", err)
	}
	for rows.Next() {
		var id string
		var first, last pgtype.Timestamptz
		var rec []byte
		if err := rows.Scan(&id, &first, &last, &rec); err != nil {
			rows.Close()
			return err
		}
		g := byID[id]
		if first.Valid {
			g.First = first.Time.UTC()
		}
		if rec != nil {
			if er, err := decodeEntryBytes(rec, nil); err == nil {
				samples[id] = er
				g.Last = er.FirstSeen
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	states := map[string]*store.GroupState{}
	rows, err = p.pool.Query(ctx, `SELECT id, rec FROM entry_groups WHERE id = ANY($1)`, ids)
	if err != nil {
		return fmt.Errorf("read group states: %w", err)
	}
	for rows.Next() {
		var id string
		var rec []byte
		if err := rows.Scan(&id, &rec); err != nil {
			rows.Close()
			return err
		}
		var st store.GroupState
		if json.Unmarshal(rec, &st) == nil {
			states[id] = &st
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		byID[id].Finish(samples[id], states[id], now)
	}
	return nil
}

// GroupStates calls fn with every lifecycle record.
func (p *Postgres) GroupStates(ctx context.Context, fn func(*store.GroupState) error) error {
	return eachRow(ctx, p, `SELECT rec FROM entry_groups ORDER BY id`, func(b []byte) error {
		var st store.GroupState
		if err := json.Unmarshal(b, &st); err != nil {
			return nil // unreadable: the next change replaces it
		}
		return fn(&st)
	})
}

// GroupState reads a group's lifecycle record (nil: none).
func (t *pgTx) GroupState(id string) (*store.GroupState, error) {
	st, err := scanJSON[store.GroupState](t.queryRow(`SELECT rec FROM entry_groups WHERE id = $1`+t.lockClause(), id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return st, err
}

// PutGroupState writes a group's lifecycle record.
func (t *pgTx) PutGroupState(st *store.GroupState) error {
	if t.ro {
		return store.ErrReadOnly
	}
	if err := store.ValidGroupState(st); err != nil {
		return err
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	t.queue("write group "+st.ID, nil, `INSERT INTO entry_groups (id, rec) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET rec = excluded.rec`, st.ID, data)
	return nil
}
