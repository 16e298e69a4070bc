package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/replayctl/replayctl/internal/store"
)

// The oldest open entry by last failure on PostgreSQL (bolt_lastfail.go
// says why): per open state, the first row of entries_last_failed (state,
// last_failed, ref) past the unknown time (the smallest int64,
// lastFailedKey), one index probe each; the smallest of those.

// oldestFailureSQL takes the open states ($1) and the unknown time ($2);
// it returns no row when no open entry has a time.
const oldestFailureSQL = `SELECT min(x.last_failed) FROM unnest($1::text[]) s(st),
	LATERAL (SELECT last_failed FROM entries WHERE state = s.st AND last_failed > $2
	  ORDER BY last_failed LIMIT 1) x HAVING min(x.last_failed) IS NOT NULL`

func oldestFailureArgs() []any { return []any{store.OpenStates(), int64(math.MinInt64)} }

// failedAt is a last_failed column's time.
func failedAt(lf int64) time.Time { return time.Unix(0, lf).UTC() }

// oldestOpenFailure is the last failure of the open entry that failed
// longest ago (zero when none).
func (p *Postgres) oldestOpenFailure(ctx context.Context) (time.Time, error) {
	rows, err := p.pool.Query(ctx, oldestFailureSQL, oldestFailureArgs()...)
	if err != nil {
		return time.Time{}, fmt.Errorf("read oldest open entry: %w", err)
	}
	defer rows.Close()
	var oldest time.Time
	for rows.Next() {
		var lf int64
		if err := rows.Scan(&lf); err != nil {
			return time.Time{}, err
		}
		oldest = failedAt(lf)
	}
	return oldest, rows.Err()
}
