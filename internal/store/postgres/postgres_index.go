package postgres

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/store"
)

// PostgreSQL answers the indexed reads with SQL: a page walks the index
// ranges of its filter columns (migration 10), totals and facets come from
// the counter rows, and the database does the work next to the data (no
// rows shipped to count).

// pgDimIndex is the expression of each dimension's index (value, ref),
// over the columns of migration 10 (pg_entry_cols.go): equal to one
// value, its range is in ref order.
var pgDimIndex = map[byte]string{
	store.DimState:  `lower(coalesce(` + pgStatusCol + `, ''))`,
	store.DimClass:  `lower(coalesce(` + pgClassCol + `, ''))`,
	store.DimAction: `lower(coalesce(` + pgActionCol + `, ''))`,
	store.DimSource: `lower(coalesce(` + pgSourceCol + `, ''))`,
	store.DimTopic:  `coalesce(` + pgTopicCol + `, '')`,
}

// pgMatch is f.Match for a record read from PostgreSQL, whose counters
// and filter columns hold a source or topic as pgText does (a NUL as
// U+FFFD): a filter built from them (a facet's link, a topic glob the
// counters expanded) matches the record as it is stored too.
func pgMatch(f *store.EntryFilter, r *store.EntryRecord) bool {
	if f.Match(r) {
		return true
	}
	if strings.IndexByte(r.Entry.Source, 0) < 0 && strings.IndexByte(r.Entry.Topic, 0) < 0 {
		return false
	}
	c := *r
	c.Entry.Source, c.Entry.Topic = pgText(r.Entry.Source), pgText(r.Entry.Topic)
	return f.Match(&c)
}

// pageCounts reads what a page needs of the entry counters: the cells,
// and the topics (counted: as Counters keys them; raw: as stored) when
// the filter has a topic. Not cellsAndOpen: a page needs neither the
// open depths nor the days, nor the cells sorted.
func (p *Postgres) pageCounts(ctx context.Context, topics bool) (cells []store.Cell, counted, raw map[string]int64, err error) {
	dims := []string{"cell"}
	if topics {
		dims = append(dims, "topic")
	}
	counted, raw = map[string]int64{}, map[string]int64{}
	err = p.entryCounts(ctx, dims, func(dim string, key []string, n int64) {
		switch {
		case dim == "cell" && len(key) == 4:
			cells = append(cells, store.Cell{Source: key[0], Class: key[1], Action: key[2], State: key[3], N: n})
		case dim == "topic" && len(key) == 1:
			counted[store.ValKey(key[0])] += n
			raw[key[0]] += n
		}
	})
	return cells, counted, raw, err
}

// pageWalk is how a filter's page walks the entries: the index ranges of
// one dimension's values (from the counters), the dimension whose values
// hold the fewest entries (of those with at most maxRanges ranges), and the states the statement checks on the
// state column (a plain column, no JSON to parse) when the filter has
// states and they are not the walked dimension. ranged is false when no
// dimension is filtered (the walk is the primary key's); values is empty
// when nothing stored matches. batch is the first statement's LIMIT: the
// rows it walks for limit+1 matches, as the counters expect them.
type pageWalk struct {
	ranged bool
	dim    byte
	values []string
	states []string
	// sources cut each range to the spans of their refs.
	sources []string
	batch   int
}

// maxRanges bounds the index ranges one statement merges (values, times
// sources when they cut them): a topic glob can match thousands of
// topics. A dimension with more is not walked; the next narrowest is, or
// the primary key.
const maxRanges = 64

func planPage(f *store.EntryFilter, choices []store.DimChoice, cells []store.Cell, raw map[string]int64, limit int) pageWalk {
	w := pageWalk{batch: limit + 1}
	valuesOf := func(ch store.DimChoice) []string {
		var vs []string
		if ch.Dim == store.DimTopic {
			// The counted topics are keyed as Counters keys them (a long
			// one by its hash); the range needs the stored topic.
			for t := range raw {
				if f.TopicMatch(t) {
					vs = append(vs, t)
				}
			}
		} else {
			// As stored: the statement lowers them as the index does (Go's
			// ToLower and the database's lower() differ beyond ASCII).
			vs = slices.Clone(ch.Values)
		}
		sort.Strings(vs)
		return vs
	}
	var sources []string
	if choices[3].Set {
		sources = valuesOf(choices[3])
	}
	var order []int
	for i, ch := range choices {
		if ch.Set {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return choices[order[a]].N < choices[order[b]].N })
	best := -1
	for _, i := range order {
		vs, cut := valuesOf(choices[i]), 1
		if choices[i].Dim != store.DimSource && len(sources) > 0 {
			cut = len(sources)
		}
		if len(vs)*cut <= maxRanges {
			best, w.values = i, vs
			break
		}
	}
	if best < 0 {
		return w
	}
	ch := choices[best]
	w.ranged, w.dim = true, ch.Dim
	if ch.Dim != store.DimSource {
		// A ref begins with its source: the range of any other dimension,
		// in ref order, holds every other source's entries before (or
		// after) the ones asked for, a walk growing with the store. Each
		// range is cut to each source's span of refs (its first and last
		// ref, from the source's index), which holds only that source's
		// entries (but for refs stored hashed, pg_keys.go).
		w.sources = sources
	}
	if choices[0].Set && ch.Dim != store.DimState {
		w.states = choices[0].Values
	}
	// The rows a match costs: of the entries the statement returns (the
	// walked values' cells, on the states it checks), those matching
	// every dimension, by the cell counters; a topic is taken as
	// independent of the cells. A quarter more, so that a page seldom
	// needs a second statement.
	in := func(c store.Cell, i int) bool {
		return !choices[i].Set || slices.Contains(choices[i].Values, cellValue(c, choices[i].Dim))
	}
	var walked, matched, entries int64
	for _, c := range cells {
		entries += c.N
		if (w.states != nil && !in(c, 0)) || (ch.Dim != store.DimTopic && !in(c, best)) || (w.sources != nil && !in(c, 3)) {
			continue
		}
		walked += c.N
		if in(c, 0) && in(c, 1) && in(c, 2) && in(c, 3) {
			matched += c.N
		}
	}
	if len(choices) > 4 && ch.Dim != store.DimTopic && entries > 0 {
		matched = matched * choices[4].N / entries
	}
	if matched > 0 && walked > matched {
		w.batch = max(w.batch, int(min(int64(limit+1)*walked*5/4/matched+1, 1000)))
	}
	return w
}

// cellValue is c's value of dimension dim (not a topic: cells have none).
func cellValue(c store.Cell, dim byte) string {
	switch dim {
	case store.DimState:
		return c.State
	case store.DimClass:
		return c.Class
	case store.DimAction:
		return c.Action
	default:
		return c.Source
	}
}

// sql is the statement reading the next batch of w after $1.
func (w *pageWalk) sql() (string, []any) {
	if !w.ranged {
		return fmt.Sprintf(`SELECT ref, rec FROM entries WHERE ref > $1 ORDER BY ref LIMIT %d`, w.batch), []any{""}
	}
	args := []any{""}
	cond := ""
	if len(w.states) > 0 {
		args = append(args, w.states)
		cond = ` AND state = ANY($2)`
	}
	// spans are the sources' first and last refs, read once (a
	// materialized CTE: two index probes a source).
	with, spans := "", []string{""}
	if len(w.sources) > 0 {
		src := pgDimIndex[store.DimSource]
		rows := make([]string, len(w.sources))
		spans = make([]string, len(w.sources))
		for j, v := range w.sources {
			args = append(args, v)
			rows[j] = fmt.Sprintf(`SELECT %d AS i, (SELECT min(ref) FROM entries WHERE %s = lower($%d)) AS lo, (SELECT max(ref) FROM entries WHERE %s = lower($%d)) AS hi`,
				j, src, len(args), src, len(args))
			spans[j] = fmt.Sprintf(` AND ref >= (SELECT lo FROM s WHERE i = %d) AND ref <= (SELECT hi FROM s WHERE i = %d)`, j, j)
		}
		with = `WITH s AS MATERIALIZED (` + strings.Join(rows, " UNION ALL ") + `) `
	}
	var parts []string
	for _, v := range w.values {
		args = append(args, v)
		val := fmt.Sprintf("lower($%d)", len(args))
		if w.dim == store.DimTopic {
			val = fmt.Sprintf("$%d", len(args))
		}
		for _, span := range spans {
			parts = append(parts, fmt.Sprintf(`(SELECT ref, rec FROM entries WHERE %s = %s AND ref > $1%s%s ORDER BY ref LIMIT %d)`, pgDimIndex[w.dim], val, span, cond, w.batch))
		}
	}
	return fmt.Sprintf(`%sSELECT ref, rec FROM (%s) u ORDER BY ref LIMIT %d`, with, strings.Join(parts, " UNION ALL "), w.batch), args
}

// Page returns up to limit entries matching f after cursor, in ref order.
//
// Issue 16: the page was one statement whose WHERE evaluated every
// dimension's JSON expression on each row of the primary key it walked
// past (two jsonb parses a row, most of a page's time). Now, as bbolt's
// Page, it walks the index ranges of the filter's narrowest dimension
// (one per value, merged in ref order by the statement: a Merge Append
// of index scans, each reading only the rows it returns), the states on
// their plain column, and the other dimensions are checked on the
// decoded record (f.Match), as before.
func (p *Postgres) Page(ctx context.Context, f store.EntryFilter, cursor string, limit int) (*store.EntryPage, error) {
	if limit <= 0 {
		limit = 20
	}
	b, err := store.DecodeCursor(cursor)
	if err != nil {
		return nil, err
	}
	after := string(b)
	if err := f.Prepare(); err != nil {
		return nil, err
	}
	// The total is the counters' (as bbolt's Page): a count(*) of the
	// filter read every matching row.
	cells, counted, raw, err := p.pageCounts(ctx, f.HasTopic())
	if err != nil {
		return nil, err
	}
	if !f.HasTopic() {
		counted = nil
	}
	choices, total, exact := store.ResolveDims(&f, cells, counted)
	page := &store.EntryPage{Items: []*store.EntryRecord{}, Total: total, TotalExact: exact}
	w := planPage(&f, choices, cells, raw, limit)
	if w.ranged && len(w.values) == 0 {
		return page, nil
	}
	var last string
	for {
		q, args := w.sql()
		args[0] = after
		rows, err := p.pool.Query(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("page entries: %w", err)
		}
		n := 0
		for rows.Next() {
			var ref string
			var rec []byte
			if err := rows.Scan(&ref, &rec); err != nil {
				rows.Close()
				return nil, err
			}
			n++
			if n > 1 && ref == after {
				// Two stored values the index lowers alike ("Poison",
				// "poison") are two ranges of the same rows, merged
				// next to each other.
				continue
			}
			after = ref
			er, err := decodeEntryBytes(rec, nil)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("decode entry %q: %w", ref, err)
			}
			er.Entry.Payload = nil
			if !pgMatch(&f, er) {
				continue
			}
			if len(page.Items) == limit {
				page.Next = store.EncodeCursor([]byte(last))
				rows.Close()
				return page, nil
			}
			page.Items = append(page.Items, er)
			last = ref
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if n < w.batch {
			return page, nil
		}
		w.batch = min(w.batch*4, 1000)
	}
}

// Counters reads the entry counters (pg_entry_counts.go), the oldest open
// entry from its index and decisions and outcomes from their counter rows
// (pg_counts.go): no statement reads a row per entry.
func (p *Postgres) Counters(ctx context.Context) (*store.Counters, error) {
	out := &store.Counters{Topics: map[string]int64{}, Days: map[string]int64{}, Outcomes: map[string]int64{}, Cells: []store.Cell{}, Open: []store.Depth{}, Signatures: []store.SignatureCount{}}
	if err := p.cellsAndOpen(ctx, out); err != nil {
		return nil, err
	}
	var err error
	if out.OldestOpen, err = p.oldestOpenFailure(ctx); err != nil {
		return nil, err
	}
	if out.Signatures, err = p.signatures(ctx); err != nil {
		return nil, err
	}
	if err := p.auditTotals(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Series counts inflow by first-seen hour and decisions and outcomes by
// record hour, from their counter rows. Drained is not kept here (it needs the entries' history).
func (p *Postgres) Series(ctx context.Context, from, to time.Time) ([]store.HourCount, error) {
	from, to = from.UTC().Truncate(time.Hour), to.UTC().Truncate(time.Hour)
	hours := map[int64]*store.HourCount{}
	hour := func(t time.Time) *store.HourCount {
		h := t.UTC().Truncate(time.Hour)
		if h.Before(from) || h.After(to) {
			return nil
		}
		hc := hours[h.Unix()]
		if hc == nil {
			hc = &store.HourCount{Hour: h}
			hours[h.Unix()] = hc
		}
		return hc
	}
	if err := p.inflowHours(ctx, from, to, hour); err != nil {
		return nil, err
	}
	if err := p.auditHours(ctx, from, to, hour); err != nil {
		return nil, err
	}
	keys := make([]int64, 0, len(hours))
	for k := range hours {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	out := make([]store.HourCount, 0, len(keys))
	for _, k := range keys {
		out = append(out, *hours[k])
	}
	return out, nil
}

// sortByPrint sorts s by each element's fmt.Sprint, the order Counters
// has always returned cells and open depths in, printing each element
// once: sort.Slice printing both sides of every comparison was a fifth of
// a /metrics scrape's CPU (issue 16).
func sortByPrint[T any](s []T) {
	keyed := make([]struct {
		key string
		v   T
	}, len(s))
	for i, v := range s {
		keyed[i].key, keyed[i].v = fmt.Sprint(v), v
	}
	sort.SliceStable(keyed, func(i, j int) bool { return keyed[i].key < keyed[j].key })
	for i := range keyed {
		s[i] = keyed[i].v
	}
}

// gaugesSQL reads a scrape's counters (the cells and open depths, not
// the topics and days it does not show) and the last failure of the
// oldest open entry (oldestFailureSQL, pg_lastfail.go) in one statement: a
// scrape's store reads were two round trips and a quarter of its time.
const gaugesSQL = `SELECT dim, key, sum(n)::bigint FROM entry_counts
	WHERE dim IN ('cell', 'open') AND at = '-infinity' GROUP BY dim, key HAVING sum(n) <> 0
	UNION ALL
	SELECT 'oldest', ARRAY[]::text[], x.lf FROM (` + oldestFailureSQL + `) x(lf)`

// gauges reads what Gauges returns, as cellsAndOpen and oldestOpen read
// it.
func (p *Postgres) gauges(ctx context.Context) (*store.Gauges, error) {
	rows, err := p.pool.Query(ctx, gaugesSQL, oldestFailureArgs()...)
	if err != nil {
		return nil, fmt.Errorf("read entry counters: %w", err)
	}
	defer rows.Close()
	g := &store.Gauges{}
	for rows.Next() {
		var dim string
		var key []string
		var n int64
		if err := rows.Scan(&dim, &key, &n); err != nil {
			return nil, err
		}
		switch {
		case dim == "cell" && len(key) == 4:
			g.Cells = append(g.Cells, store.Cell{Source: key[0], Class: key[1], Action: key[2], State: key[3], N: n})
		case dim == "open" && len(key) == 2:
			g.Open = append(g.Open, store.Depth{Source: key[0], Topic: store.ValKey(key[1]), N: n})
		case dim == "oldest":
			g.OldestOpen = failedAt(n) // pg_lastfail.go
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sortByPrint(g.Cells)
	sortByPrint(g.Open)
	return g, nil
}
