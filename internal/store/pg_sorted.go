package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
)

// Sorted pages on PostgreSQL (issue 16): a page sorted by last failure
// sorted every entry the filter's WHERE kept. Now, as bbolt's SortedPage
// (bolt_views.go), one ordered range per state the filter selects is read
// from entries_last_failed (state, last_failed, ref in byte order) and
// the ranges are merged here: a page's cost follows the entries it walks
// past, not the table. state and last_failed are columns written in Go
// (migration 8): last_failed is LastFailure in Unix nanoseconds, the
// smallest int64 when unknown, which orders exactly as bbolt's orderKey.

// lastFailedKey is r's sort key, as orderKey (bolt_views.go) orders.
func lastFailedKey(r *EntryRecord) int64 {
	t := LastFailure(r)
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

// sortedCursor is a sorted page's cursor: the last item's key, encoded as
// bbolt's (an 8-byte order key, then the ref).
func sortedCursor(lf int64, ref string) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(lf)^(1<<63))
	return encodeCursor(append(b, ref...))
}

// sortedHead reads one state's range in batches.
type sortedHead struct {
	state  string
	rows   []sortedRow
	from   *sortedRow // the last row read: the next batch starts after it
	done   bool
	batch  int
	newest bool
}

type sortedRow struct {
	lf  int64
	ref string
	rec []byte
}

// less orders a before b in the page's direction.
func (h *sortedHead) less(a, b *sortedRow) bool {
	if a.lf != b.lf {
		return (a.lf < b.lf) != h.newest
	}
	return (a.ref < b.ref) != h.newest
}

// fill reads the next batch when the head has no row left.
func (p *Postgres) fill(ctx context.Context, h *sortedHead, bound *int64) error {
	if len(h.rows) > 0 || h.done {
		return nil
	}
	cmp, dir := ">", "ASC"
	if h.newest {
		cmp, dir = "<", "DESC"
	}
	args := []any{h.state}
	q := `SELECT last_failed, ref, rec FROM entries WHERE state = $1`
	if h.from != nil {
		args = append(args, h.from.lf, h.from.ref)
		q += fmt.Sprintf(` AND (last_failed, ref COLLATE ucs_basic) %s ($2, $3)`, cmp)
	}
	if bound != nil {
		args = append(args, *bound)
		q += fmt.Sprintf(` AND last_failed <= $%d`, len(args))
	}
	q += fmt.Sprintf(` ORDER BY last_failed %s, ref COLLATE ucs_basic %s LIMIT %d`, dir, dir, h.batch)
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("page entries by last failure: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r sortedRow
		if err := rows.Scan(&r.lf, &r.ref, &r.rec); err != nil {
			return err
		}
		h.rows = append(h.rows, r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(h.rows) < h.batch {
		h.done = true
	}
	if n := len(h.rows); n > 0 {
		h.from = &h.rows[n-1]
	}
	h.batch = min(h.batch*4, 1000)
	return nil
}

// SortedPage returns up to limit entries matching f after cursor, by last
// failure (oldest first, or newest first), ties by ref in byte order: the
// order and cursors of store.Bolt.SortedPage. The total is the counters'.
func (p *Postgres) SortedPage(ctx context.Context, f EntryFilter, newest bool, cursor string, limit int) (*EntryPage, error) {
	limit, after, err := sortedPageArgs(&f, cursor, limit)
	if err != nil {
		return nil, err
	}
	c := &Counters{Topics: map[string]int64{}, Days: map[string]int64{}}
	if err := p.cellsAndOpen(ctx, c); err != nil {
		return nil, err
	}
	var topics map[string]int64
	if f.hasTopic() {
		topics = c.Topics
	}
	choices, total, exact := resolveDims(&f, c.Cells, topics)
	page := &EntryPage{Items: []*EntryRecord{}, Total: total, TotalExact: exact}
	var from *sortedRow
	if after != nil {
		from = &sortedRow{lf: int64(binary.BigEndian.Uint64(after[:8]) ^ (1 << 63)), ref: string(after[8:])}
	}
	var bound *int64
	if !f.LastFailedBy.IsZero() {
		b := f.LastFailedBy.UnixNano()
		bound = &b
	}
	var heads []*sortedHead
	for _, st := range choices[0].values {
		heads = append(heads, &sortedHead{state: st, from: from, batch: limit + 1, newest: newest})
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var at *sortedHead
		for _, h := range heads {
			if err := p.fill(ctx, h, bound); err != nil {
				return nil, err
			}
			if len(h.rows) > 0 && (at == nil || h.less(&h.rows[0], &at.rows[0])) {
				at = h
			}
		}
		if at == nil {
			return page, nil
		}
		row := at.rows[0]
		at.rows = at.rows[1:]
		r, err := decodeEntryBytes(row.rec, nil)
		if err != nil {
			return nil, fmt.Errorf("decode entry %q: %w", row.ref, err)
		}
		r.Entry.Payload = nil
		if !f.Match(r) {
			continue
		}
		if len(page.Items) == limit {
			page.Next = sortedCursor(from.lf, from.ref)
			return page, nil
		}
		page.Items = append(page.Items, r)
		from = &row
	}
}
