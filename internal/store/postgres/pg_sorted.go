package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/replayctl/replayctl/internal/store"
)

// Sorted pages on PostgreSQL (issue 16): a page sorted by last failure
// sorted every entry the filter's WHERE kept. Now, as bbolt's SortedPage
// (bolt_views.go), one ordered range per state the filter selects is read
// from entries_last_failed (state, last_failed, ref in byte order) and
// the ranges are merged by the statement (sortedBatch): a page's cost
// follows the entries it walks past, not the table. state and last_failed are columns written in Go
// (migration 8): last_failed is LastFailure in Unix nanoseconds, the
// smallest int64 when unknown, which orders exactly as bbolt's store.OrderKey.

// lastFailedKey is r's sort key, as store.OrderKey (bolt_views.go) orders.
func lastFailedKey(r *store.EntryRecord) int64 {
	t := store.LastFailure(r)
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

// sortedCursor is a sorted page's cursor: the last item's key, encoded as
// bbolt's (an 8-byte order key, then the ref).
func sortedCursor(lf int64, ref string) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(lf)^(1<<63))
	return store.EncodeCursor(append(b, ref...))
}

type sortedRow struct {
	lf  int64
	ref string
	rec []byte
}

// sortedBatch reads the next batch of the page's order after from (all
// of it when from is nil): one statement, whose per-state ranges of
// entries_last_failed PostgreSQL merges (a Merge Append of index scans,
// each reading only the rows it returns). A round trip per state and
// batch was most of a page's time (issue 16).
func (p *Postgres) sortedBatch(ctx context.Context, states []string, newest bool, from *sortedRow, bound *int64, batch int) ([]sortedRow, error) {
	cmp, dir := ">", "ASC"
	if newest {
		cmp, dir = "<", "DESC"
	}
	var args []any
	var conds []string
	if from != nil {
		args = append(args, from.lf, from.ref)
		conds = append(conds, fmt.Sprintf(`(last_failed, ref COLLATE ucs_basic) %s ($1, $2)`, cmp))
	}
	if bound != nil {
		args = append(args, *bound)
		conds = append(conds, fmt.Sprintf(`last_failed <= $%d`, len(args)))
	}
	parts := make([]string, len(states))
	for i, st := range states {
		args = append(args, st)
		where := append([]string{fmt.Sprintf(`state = $%d`, len(args))}, conds...)
		parts[i] = fmt.Sprintf(`(SELECT last_failed, ref COLLATE ucs_basic AS ref, rec FROM entries WHERE %s
			ORDER BY last_failed %s, ref COLLATE ucs_basic %s LIMIT %d)`, strings.Join(where, " AND "), dir, dir, batch)
	}
	q := fmt.Sprintf(`SELECT last_failed, ref, rec FROM (%s) u ORDER BY last_failed %s, ref %s LIMIT %d`,
		strings.Join(parts, " UNION ALL "), dir, dir, batch)
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("page entries by last failure: %w", err)
	}
	defer rows.Close()
	var out []sortedRow
	for rows.Next() {
		var r sortedRow
		if err := rows.Scan(&r.lf, &r.ref, &r.rec); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// SortedPage returns up to limit entries matching f after cursor, by last
// failure (oldest first, or newest first), ties by ref in byte order: the
// order and cursors of bolt.Bolt.SortedPage. The total is the counters'.
func (p *Postgres) SortedPage(ctx context.Context, f store.EntryFilter, newest bool, cursor string, limit int) (*store.EntryPage, error) {
	limit, after, err := store.SortedPageArgs(&f, cursor, limit)
	if err != nil {
		return nil, err
	}
	cells, topics, _, err := p.pageCounts(ctx, f.HasTopic())
	if err != nil {
		return nil, err
	}
	if !f.HasTopic() {
		topics = nil
	}
	choices, total, exact := store.ResolveDims(&f, cells, topics)
	page := &store.EntryPage{Items: []*store.EntryRecord{}, Total: total, TotalExact: exact}
	states := choices[0].Values
	if len(states) == 0 {
		return page, nil
	}
	var from *sortedRow
	if after != nil {
		from = &sortedRow{lf: int64(binary.BigEndian.Uint64(after[:8]) ^ (1 << 63)), ref: string(after[8:])}
	}
	var bound *int64
	if !f.LastFailedBy.IsZero() {
		b := f.LastFailedBy.UnixNano()
		bound = &b
	}
	// walked is the last row read: the next batch starts after it; from
	// is the last row on the page, its cursor.
	walked := from
	batch := limit + 1
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rows, err := p.sortedBatch(ctx, states, newest, walked, bound, batch)
		if err != nil {
			return nil, err
		}
		for i := range rows {
			row := &rows[i]
			walked = row
			r, err := decodeEntryBytes(row.rec, nil)
			if err != nil {
				return nil, fmt.Errorf("decode entry %q: %w", row.ref, err)
			}
			r.Entry.Payload = nil
			if !pgMatch(&f, r) {
				continue
			}
			if len(page.Items) == limit {
				page.Next = sortedCursor(from.lf, from.ref)
				return page, nil
			}
			page.Items = append(page.Items, r)
			from = row
		}
		if len(rows) < batch {
			return page, nil
		}
		batch = min(batch*4, 1000)
	}
}
