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
	add(pgDoc+`->>'status'`, f.States)
	add(pgDoc+`->>'class'`, f.Classes)
	add(pgDoc+`->>'action'`, f.Actions)
	add(pgDoc+`->'entry'->>'source'`, f.Sources)
	if f.hasTopic() {
		args = append(args, topics)
		conds = append(conds, fmt.Sprintf(`coalesce(%s->'entry'->>'topic', '') = ANY($%d)`, pgDoc, len(args)))
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
	page := &EntryPage{Items: []*EntryRecord{}, TotalExact: !f.residual()}
	// A topic glob (with '.' as separator, as in rules.yaml) becomes the
	// list of stored topics it matches.
	topics := []string{}
	if f.hasTopic() {
		rows, err := p.pool.Query(ctx, `SELECT DISTINCT coalesce(`+pgDoc+`->'entry'->>'topic', '') FROM entries`)
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
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM entries WHERE `+where, args...).Scan(&page.Total); err != nil {
		return nil, fmt.Errorf("count entries: %w", err)
	}
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

// Counters counts entries with GROUP BY queries; decisions and outcomes
// come from their counter rows.
func (p *Postgres) Counters(ctx context.Context) (*Counters, error) {
	out := &Counters{Topics: map[string]int64{}, Days: map[string]int64{}, Outcomes: map[string]int64{}, Cells: []Cell{}, Open: []Depth{}, Signatures: []SignatureCount{}}
	rows, err := p.pool.Query(ctx, `SELECT coalesce(d->'entry'->>'source',''), coalesce(d->>'class',''), coalesce(d->>'action',''),
		coalesce(d->>'status',''), coalesce(d->'entry'->>'topic',''), coalesce(d->>'first_seen',''), count(*)
		FROM (SELECT `+pgDoc+` AS d FROM entries) e GROUP BY 1, 2, 3, 4, 5, 6`)
	if err != nil {
		return nil, fmt.Errorf("count entries: %w", err)
	}
	cells := map[Cell]int64{}
	open := map[Depth]int64{}
	for rows.Next() {
		var c Cell
		var topic, seen string
		var n int64
		if err := rows.Scan(&c.Source, &c.Class, &c.Action, &c.State, &topic, &seen, &n); err != nil {
			rows.Close()
			return nil, err
		}
		out.Entries += n
		cells[c] += n
		out.Topics[valKey(topic)] += n
		first, _ := time.Parse(time.RFC3339Nano, seen)
		out.Days[first.UTC().Format("2006-01-02")] += n
		if IsOpen(c.State) {
			open[Depth{Source: c.Source, Topic: valKey(topic)}] += n
			if !first.IsZero() && (out.OldestOpen.IsZero() || first.Before(out.OldestOpen)) {
				out.OldestOpen = first.UTC()
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for c, n := range cells {
		c.N = n
		out.Cells = append(out.Cells, c)
	}
	for d, n := range open {
		d.N = n
		out.Open = append(out.Open, d)
	}
	sort.Slice(out.Cells, func(i, j int) bool { return fmt.Sprint(out.Cells[i]) < fmt.Sprint(out.Cells[j]) })
	sort.Slice(out.Open, func(i, j int) bool { return fmt.Sprint(out.Open[i]) < fmt.Sprint(out.Open[j]) })

	// Signatures are computed in Go (the same function as bbolt) from the
	// distinct (signature, reason, message) groups.
	rows, err = p.pool.Query(ctx, `SELECT coalesce(d->'entry'->'source_state'->>'error_signature',''), coalesce(d->'entry'->>'reason_code',''),
		coalesce(d->'entry'->>'message',''), min(ref), (array_agg(coalesce(d->>'class','') ORDER BY ref))[1], count(*)
		FROM (SELECT ref, `+pgDoc+` AS d FROM entries) e GROUP BY 1, 2, 3`)
	if err != nil {
		return nil, fmt.Errorf("count signatures: %w", err)
	}
	sigs := map[string]*SignatureCount{}
	for rows.Next() {
		var er EntryRecord
		var example, class string
		var n int64
		if err := rows.Scan(&er.Entry.State.ErrorSignature, &er.Entry.ReasonCode, &er.Entry.Message, &example, &class, &n); err != nil {
			rows.Close()
			return nil, err
		}
		sig := Signature(&er)
		sc := sigs[sig]
		if sc == nil {
			sc = &SignatureCount{Signature: sig, Class: class, Example: example}
			sigs[sig] = sc
		} else if example < sc.Example {
			sc.Class, sc.Example = class, example
		}
		sc.N += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, sc := range sigs {
		out.Signatures = append(out.Signatures, *sc)
	}
	sort.Slice(out.Signatures, func(i, j int) bool {
		a, b := out.Signatures[i], out.Signatures[j]
		if a.N != b.N {
			return a.N > b.N
		}
		return a.Signature < b.Signature
	})
	// Decisions, denials and outcomes come from their counters
	// (pg_counts.go), never from the audit chain.
	if err := p.auditTotals(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Series counts inflow by first-seen hour and decisions and outcomes by
// record hour. Drained is not kept here (it needs the entries' history).
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
	rows, err := p.pool.Query(ctx, `SELECT coalesce(`+pgDoc+`->>'first_seen',''), coalesce(`+pgDoc+`->>'class','') FROM entries`)
	if err != nil {
		return nil, fmt.Errorf("series: %w", err)
	}
	for rows.Next() {
		var seen, class string
		if err := rows.Scan(&seen, &class); err != nil {
			rows.Close()
			return nil, err
		}
		if t, err := time.Parse(time.RFC3339Nano, seen); err == nil {
			if h := hour(t); h != nil {
				h.Inflow++
				h.addClass(&h.InflowByClass, class, 1)
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
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
