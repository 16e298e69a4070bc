package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// Decision and outcome counters on PostgreSQL (issue 16, "reads
// independent of store size"). Counters and Series read the whole audit
// chain to count decisions, denials and outcomes; now every transaction
// that appends records adds what they count to counter rows, in the same
// transaction, as bbolt does in its counters bucket (bolt_index.go:
// countAudit, the same rule: store.AuditCounts). A row per (hour, what) and a
// total per what (hour -infinity); each is split in shards by the writing
// connection's backend pid, so concurrent writers do not queue on one hot
// row (the audit head lock was that queue), and a read sums the shards.

const pgCountsMigration = `CREATE TABLE audit_counts (hour timestamptz NOT NULL, what text NOT NULL, shard int NOT NULL,
	   n bigint NOT NULL, PRIMARY KEY (hour, what, shard));`

// countShards bounds the rows per (hour, what).
const countShards = "16"

// countKey is one counter: "D" decisions, "X" denied, "O"+outcome (the
// letters of bbolt's counters); hour is zero for the total.
type countKey struct {
	hour time.Time
	what string
}

// countAppend notes what r adds to the counters, for commit.
func (t *pgTx) countAppend(r *audit.Record) {
	dec, den, out := store.AuditCounts(r)
	if !dec && !den && out == "" {
		return
	}
	if t.counts == nil {
		t.counts = map[countKey]int64{}
	}
	h := r.Time.UTC().Truncate(time.Hour)
	add := func(what string) {
		t.counts[countKey{what: what}]++
		t.counts[countKey{hour: h, what: what}]++
	}
	if dec {
		add("D")
	}
	if den {
		add("X")
	}
	if out != "" {
		add("O" + out)
	}
}

// auditCountsSQL adds the transaction's audit counts (countArrays), its
// rows in one order (so two writers on one shard never deadlock).
const auditCountsSQL = `INSERT INTO audit_counts (hour, what, shard, n)
	SELECT h, w, pg_backend_pid() % ` + countShards + `, c FROM unnest($1::timestamptz[], $2::text[], $3::bigint[]) AS u(h, w, c) ORDER BY h, w
	ON CONFLICT (hour, what, shard) DO UPDATE SET n = audit_counts.n + excluded.n`

// auditCountsWrite is the statement adding the transaction's counts, for
// COMMIT (commitWrites); none when its records count nothing.
func (t *pgTx) auditCountsWrite() (commitWrite, bool) {
	if len(t.counts) == 0 {
		return commitWrite{}, false
	}
	hours, whats, ns := countArrays(t.counts)
	t.counts = nil
	return commitWrite{sql: auditCountsSQL, args: []any{hours, whats, ns}}, true
}

// countArrays turns counts into the statement's arrays; the total's hour
// is -infinity.
func countArrays(counts map[countKey]int64) ([]pgtype.Timestamptz, []string, []int64) {
	keys := make([]countKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if !keys[i].hour.Equal(keys[j].hour) {
			return keys[i].hour.Before(keys[j].hour)
		}
		return keys[i].what < keys[j].what
	})
	hours, whats, ns := make([]pgtype.Timestamptz, len(keys)), make([]string, len(keys)), make([]int64, len(keys))
	for i, k := range keys {
		hours[i], whats[i], ns[i] = pgHour(k.hour), k.what, counts[k]
	}
	return hours, whats, ns
}

// pgHour is a counter row's hour: the total's is -infinity.
func pgHour(h time.Time) pgtype.Timestamptz {
	if h.IsZero() {
		return pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	}
	return pgtype.Timestamptz{Time: h, Valid: true}
}

// addCounted adds a counter row to the decision counters of c or h.
func addCounted(what string, n int64, decisions, denied *int64, outcomes *map[string]int64) {
	switch {
	case what == "D":
		*decisions += n
	case what == "X":
		*denied += n
	case len(what) > 1 && what[0] == 'O':
		if *outcomes == nil {
			*outcomes = map[string]int64{}
		}
		(*outcomes)[what[1:]] += n
	}
}

// auditTotals reads the decision counters' totals.
func (p *Postgres) auditTotals(ctx context.Context, out *store.Counters) error {
	rows, err := p.pool.Query(ctx, `SELECT what, sum(n)::bigint FROM audit_counts WHERE hour = '-infinity' GROUP BY what`)
	if err != nil {
		return fmt.Errorf("read decision counters: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var what string
		var n int64
		if err := rows.Scan(&what, &n); err != nil {
			return err
		}
		addCounted(what, n, &out.Decisions, &out.Denied, &out.Outcomes)
	}
	return rows.Err()
}

// auditHours reads the decision counters of the hours from..to.
func (p *Postgres) auditHours(ctx context.Context, from, to time.Time, hour func(time.Time) *store.HourCount) error {
	err := p.hourCounts(ctx, `SELECT hour, what, sum(n)::bigint FROM audit_counts WHERE hour >= $1 AND hour <= $2 GROUP BY hour, what`,
		from, to, func(h time.Time, what string, n int64) {
			if hc := hour(h); hc != nil {
				addCounted(what, n, &hc.Decisions, &hc.Denied, &hc.Outcomes)
			}
		})
	if err != nil {
		return fmt.Errorf("read decision counters: %w", err)
	}
	return nil
}

// hourCounts runs a query of (hour, name, count) rows over the hours
// from..to and hands each row to fn (auditHours, inflowHours).
func (p *Postgres) hourCounts(ctx context.Context, query string, from, to time.Time, fn func(hour time.Time, name string, n int64)) error {
	rows, err := p.pool.Query(ctx, query, from, to)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var h time.Time
		var name string
		var n int64
		if err := rows.Scan(&h, &name, &n); err != nil {
			return err
		}
		fn(h, name, n)
	}
	return rows.Err()
}

// backfillCounts counts the records written before the counters existed,
// once, in the migration's transaction (under the migration lock).
func backfillCounts(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT body FROM audit ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("count audit records: %w", err)
	}
	t := &pgTx{}
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			rows.Close()
			return err
		}
		var r audit.Record
		if err := json.Unmarshal(body, &r); err != nil {
			rows.Close()
			return fmt.Errorf("count audit records: decode a record: %w", err)
		}
		t.countAppend(&r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(t.counts) == 0 {
		return nil
	}
	hours, whats, ns := countArrays(t.counts)
	_, err = tx.Exec(ctx, `INSERT INTO audit_counts (hour, what, shard, n) SELECT h, w, 0, c FROM unnest($1::timestamptz[], $2::text[], $3::bigint[]) AS u(h, w, c)`,
		hours, whats, ns)
	return err
}
