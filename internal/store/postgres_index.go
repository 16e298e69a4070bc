package store

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// PostgreSQL answers the indexed reads with SQL: the filters become WHERE
// clauses over the record's JSON, counts become COUNT ... GROUP BY, and
// the database does the work next to the data (no rows shipped to count).

// pgDoc is an entry record as jsonb; the expression indexes of migration 2
// are on it, so filters must spell it the same way.
const pgDoc = `replayctl_doc(rec)`

// pgWhere turns the indexed parts of f into SQL; args continue from $n.
// topics are the stored topics the glob matches (when f.Topic is set).
func pgWhere(f *EntryFilter, topics []string, args []any) (string, []any) {
	var conds []string
	add := func(expr string, want []string) {
		if len(want) == 0 {
			return
		}
		lower := make([]string, len(want))
		for i, w := range want {
			lower[i] = strings.ToLower(w)
		}
		args = append(args, lower)
		conds = append(conds, fmt.Sprintf("lower(coalesce(%s, '')) = ANY($%d)", expr, len(args)))
	}
	add(pgStatusCol, f.States)
	add(pgClassCol, f.Classes)
	add(pgActionCol, f.Actions)
	add(pgSourceCol, f.Sources)
	if f.hasTopic() {
		args = append(args, topics)
		conds = append(conds, fmt.Sprintf(`coalesce(%s, '') = ANY($%d)`, pgTopicCol, len(args)))
	}
	if len(conds) == 0 {
		return "TRUE", args
	}
	return strings.Join(conds, " AND "), args
}

// Page returns up to limit entries matching f after cursor, in ref order.
func (p *Postgres) Page(ctx context.Context, f EntryFilter, cursor string, limit int) (*EntryPage, error) {
	if limit <= 0 {
		limit = 20
	}
	b, err := decodeCursor(cursor)
	if err != nil {
		return nil, err
	}
	after := string(b)
	if err := f.prepare(); err != nil {
		return nil, err
	}
	// The total is the counters' (as bbolt's Page): a count(*) of the
	// filter read every matching row.
	c := &Counters{Topics: map[string]int64{}, Days: map[string]int64{}}
	if err := p.cellsAndOpen(ctx, c); err != nil {
		return nil, err
	}
	var counted map[string]int64
	if f.hasTopic() {
		counted = c.Topics
	}
	_, total, exact := resolveDims(&f, c.Cells, counted)
	page := &EntryPage{Items: []*EntryRecord{}, Total: total, TotalExact: exact}
	// A topic glob (with '.' as separator, as in rules.yaml) becomes the
	// list of stored topics it matches.
	topics := []string{}
	if f.hasTopic() {
		rows, err := p.pool.Query(ctx, `SELECT key[1] FROM entry_counts WHERE dim = 'topic' AND at = '-infinity' GROUP BY key HAVING sum(n) <> 0`)
		if err != nil {
			return nil, fmt.Errorf("list topics: %w", err)
		}
		for rows.Next() {
			var t string
			if err := rows.Scan(&t); err != nil {
				rows.Close()
				return nil, err
			}
			if f.TopicMatch(t) {
				topics = append(topics, t)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	where, args := pgWhere(&f, topics, nil)
	batch := limit + 1
	var last string
	for {
		q := fmt.Sprintf(`SELECT ref, rec FROM entries WHERE ref > $%d AND %s ORDER BY ref LIMIT %d`, len(args)+1, where, batch)
		rows, err := p.pool.Query(ctx, q, append(args, after)...)
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
			after = ref
			er, err := decodeEntryBytes(rec, nil)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("decode entry %q: %w", ref, err)
			}
			er.Entry.Payload = nil
			if !f.Match(er) {
				continue
			}
			if len(page.Items) == limit {
				page.Next = encodeCursor([]byte(last))
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
		if n < batch {
			return page, nil
		}
		batch = min(batch*4, 1000)
	}
}

// Counters reads the entry counters (pg_entry_counts.go), the oldest open
// entry from its index and decisions and outcomes from their counter rows
// (pg_counts.go): no statement reads a row per entry.
func (p *Postgres) Counters(ctx context.Context) (*Counters, error) {
	out := &Counters{Topics: map[string]int64{}, Days: map[string]int64{}, Outcomes: map[string]int64{}, Cells: []Cell{}, Open: []Depth{}, Signatures: []SignatureCount{}}
	if err := p.cellsAndOpen(ctx, out); err != nil {
		return nil, err
	}
	var err error
	if out.OldestOpen, err = p.oldestOpen(ctx); err != nil {
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
func (p *Postgres) Series(ctx context.Context, from, to time.Time) ([]HourCount, error) {
	from, to = from.UTC().Truncate(time.Hour), to.UTC().Truncate(time.Hour)
	hours := map[int64]*HourCount{}
	hour := func(t time.Time) *HourCount {
		h := t.UTC().Truncate(time.Hour)
		if h.Before(from) || h.After(to) {
			return nil
		}
		hc := hours[h.Unix()]
		if hc == nil {
			hc = &HourCount{Hour: h}
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
	out := make([]HourCount, 0, len(keys))
	for _, k := range keys {
		out = append(out, *hours[k])
	}
	return out, nil
}
