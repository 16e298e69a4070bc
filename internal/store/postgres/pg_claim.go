package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayctl/replayctl/internal/store"
)

// Ingest once per run: of the workers that start a run together, the one
// that takes the ingest lock reads the sources; the others only claim, and
// keep claiming while it ingests (its batches are claimable as they
// commit). A worker whose run began before an ingest completed does not
// read the sources again: workers started together ingest once, however
// their starts interleave; entries that reached a source meanwhile are the
// next run's.

// pgIngestMigration records the last complete ingest.
const pgIngestMigration = `CREATE TABLE ingest_runs (id int PRIMARY KEY CHECK (id = 1), started timestamptz NOT NULL, finished timestamptz);`

const lockIngest int64 = 0x7265706c61790004

// LeadIngest makes this worker the run's ingester when no other worker is
// ingesting and no ingest completed at or after since. done
// releases the lead and, when the ingest succeeded, records it complete.
func (p *Postgres) LeadIngest(ctx context.Context, since time.Time) (done func(ok bool), lead bool, err error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("ingest lead: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, lockIngest).Scan(&ok); err != nil {
		conn.Release()
		return nil, false, fmt.Errorf("ingest lead: %w", err)
	}
	if !ok {
		conn.Release()
		return nil, false, nil
	}
	unlock := func() {
		_, _ = conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, lockIngest)
		conn.Release()
	}
	var finished *time.Time
	err = conn.QueryRow(ctx, `SELECT finished FROM ingest_runs WHERE id = 1`).Scan(&finished)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		unlock()
		return nil, false, fmt.Errorf("ingest lead: %w", err)
	}
	if err == nil && finished != nil && !finished.Before(since) {
		// This run's entries are in already.
		unlock()
		return nil, false, nil
	}
	if _, err := conn.Exec(ctx, `INSERT INTO ingest_runs (id, started) VALUES (1, now())
		ON CONFLICT (id) DO UPDATE SET started = excluded.started, finished = NULL`); err != nil {
		unlock()
		return nil, false, fmt.Errorf("ingest lead: %w", err)
	}
	return func(ok bool) {
		if ok {
			_, _ = conn.Exec(context.Background(), `UPDATE ingest_runs SET finished = now() WHERE id = 1`)
		}
		unlock()
	}, true, nil
}

// Ingesting reports whether a worker holds the ingest lead now.
func (p *Postgres) Ingesting(ctx context.Context) (bool, error) {
	// An advisory lock on a bigint key shows in pg_locks as its high and
	// low 32 bits (classid, objid) with objsubid 1.
	var held bool
	err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1)`, lockIngest).Scan(&held)
	if err != nil {
		return false, fmt.Errorf("ingest lead: %w", err)
	}
	return held, nil
}

// A run releases each claim when its entry is handled; sent one by one,
// that was a round trip and a transaction per entry. A run's worker queues
// its releases instead (ReleaseLater) and this process sends them with its
// next claim, in the same round trip, or when the run's pass ends
// (FlushReleases). Until then the entry stays leased to the worker that
// handled it, so no other worker takes it; if the process dies first the
// lease runs out as for any claim, and the ledger shows the entry handled.

//
// A release marks the entry checked (last_checked, which the claim orders
// and filters by: a run does not claim again what it checked). That moved
// an indexed column (entries_work), so the release was a fifth row
// version of the entry with an entry in each of its ten indexes. Now the
// write under the claim that ends its handling (checksClaim: a decision or
// outcome other than a dispatch under way or a retry) sets last_checked in
// the update it makes anyway (not HOT: it moves the state), and the
// release keeps it: it changes only the lease columns, no index's, a HOT
// update. A claim whose handling wrote no such outcome (a retry, a
// dispatch left to recover, a failed write) is marked at its release as
// before. The difference: a worker that dies between that write and its
// release leaves the entry checked, so after its lease the next run, not
// another worker of this one, looks at it again; its outcome is recorded.
// The last write under the claim decides: a write in the replaying state
// (an intent) clears last_checked (NULL: claimed first), so an intent
// after a checked write (a probe's, then an approved replay's dispatch)
// leaves a dispatch that a dying worker abandons to this run's others.

const releaseMany = `SELECT replayctl_release($1, $2, $3)`

// pgClaimFuncsMigration (schema version 11) makes the claim and the
// release functions that use their generic plan. As prepared statements
// PostgreSQL planned them again at every call: their custom plans (the
// array's length, the LIMIT known) are estimated cheaper than the generic
// one, so the plan cache never settled on it, and planning was about 40%
// of their time (~75 of ~1,100 µs of the server's time per replay, by
// pg_stat_statements). The generic plans are the ones wanted: the claim
// reads entries_work in order under its LIMIT (the custom one could
// bitmap-scan every unchecked entry and sort them) and updates the rows it
// locked by primary key (an array, not a join: the generic plan does not
// know the LIMIT and joined a CTE it took for 10% of the table by a
// sequential scan), the release probes the primary key per ref. Inside a PL/pgSQL function with plan_cache_mode set
// for it alone, the plan is made once per connection; no session setting
// leaks to a pooled connection. TestPostgresClaimUsesItsGenericPlan.
const pgClaimFuncsMigration = `CREATE FUNCTION replayctl_claim(p_since timestamptz, p_n int, p_owner text, p_lease_ms bigint)
	   RETURNS TABLE (fence bigint, rec bytea, payload bytea)
	   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
	 BEGIN
	   RETURN QUERY UPDATE entries e SET lease_owner = p_owner, lease_until = now() + p_lease_ms * interval '1 millisecond', fence = nextval('fence_seq')
	     WHERE e.ref = ANY (ARRAY(
	       SELECT c.ref FROM entries c
	       WHERE (c.last_checked IS NULL OR c.last_checked < p_since) AND (c.lease_until IS NULL OR c.lease_until < now())
	       ORDER BY c.last_checked NULLS FIRST, c.ref
	       LIMIT p_n
	       FOR UPDATE SKIP LOCKED))
	     RETURNING e.fence, e.rec, e.payload;
	 END $$;
	 CREATE FUNCTION replayctl_release(p_refs text[], p_fences bigint[], p_kept bool[]) RETURNS void
	   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
	 BEGIN
	   UPDATE entries e SET last_checked = CASE WHEN r.kept THEN e.last_checked ELSE now() END, lease_owner = NULL, lease_until = NULL
	   FROM unnest(p_refs, p_fences, p_kept) AS r(ref, fence, kept) WHERE e.ref = r.ref AND e.fence = r.fence;
	 END $$;`

// checksClaim says whether writing r under a claim ends its handling, so
// the write marks the entry checked: any state but replaying (a dispatch
// under way, or a retry this run may take again).
func checksClaim(r *store.EntryRecord) bool { return r.Status != store.StatusReplaying }

// markChecked notes whether the last committed write under the claim
// token left its entry checked (a write in the replaying state clears
// last_checked, so the entry stays claimable by this run if its worker
// dies).
func (p *Postgres) markChecked(token int64, checked bool) {
	p.relMu.Lock()
	defer p.relMu.Unlock()
	if !checked {
		delete(p.checked, token)
		return
	}
	if p.checked == nil {
		p.checked = map[int64]bool{}
	}
	p.checked[token] = true
}

// takeChecked says whether the claim token's entry was marked checked,
// and forgets the claim.
func (p *Postgres) takeChecked(token int64) bool {
	p.relMu.Lock()
	defer p.relMu.Unlock()
	kept := p.checked[token]
	delete(p.checked, token)
	return kept
}

// ReleaseLater queues Release(ref, token) for this process's next claim.
func (p *Postgres) ReleaseLater(ref string, token int64) {
	p.dropAhead(token)
	p.relMu.Lock()
	defer p.relMu.Unlock()
	p.relRefs = append(p.relRefs, pgKey(ref))
	p.relTokens = append(p.relTokens, token)
	p.relKept = append(p.relKept, p.checked[token])
	delete(p.checked, token)
}

func (p *Postgres) takeReleases() ([]string, []int64, []bool) {
	p.relMu.Lock()
	defer p.relMu.Unlock()
	refs, tokens, kept := p.relRefs, p.relTokens, p.relKept
	p.relRefs, p.relTokens, p.relKept = nil, nil, nil
	return refs, tokens, kept
}

// FlushReleases sends the queued releases now.
func (p *Postgres) FlushReleases(ctx context.Context) error {
	refs, tokens, kept := p.takeReleases()
	if len(refs) == 0 {
		return nil
	}
	if _, err := p.pool.Exec(ctx, releaseMany, refs, tokens, kept); err != nil {
		return fmt.Errorf("release %d claims: %w", len(refs), err)
	}
	return nil
}

// HeldElsewhere counts the entries not checked since `since` that a live
// lease of another owner holds, and when the last of those leases ends:
// what a run could not take (a worker handling them, or one that died
// before its lease ends). It walks entries_work's unchecked range only.
func (p *Postgres) HeldElsewhere(ctx context.Context, owner string, since time.Time) (int, time.Time, error) {
	var n int
	var until *time.Time
	err := p.pool.QueryRow(ctx, `SELECT count(*), max(lease_until) FROM entries
		WHERE (last_checked IS NULL OR last_checked < $1) AND lease_until > now() AND lease_owner IS DISTINCT FROM $2`,
		since, owner).Scan(&n, &until)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("count entries held by other workers: %w", err)
	}
	if until == nil {
		return n, time.Time{}, nil
	}
	return n, *until, nil
}

// RenewLease extends the lease of a claim that is still current to
// lease from now, and says whether it was. Current is what a fence check
// takes it to be (checkFence, CheckFences): its token, and its lease not
// yet ended. lease_until is in no index: the update is HOT.
func (p *Postgres) RenewLease(ctx context.Context, ref string, token int64, lease time.Duration) (bool, error) {
	tag, err := p.pool.Exec(ctx, `UPDATE entries SET lease_until = now() + $3 * interval '1 millisecond'
		WHERE ref = $1 AND fence = $2 AND lease_until > now()`, pgKey(ref), token, lease.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("renew the lease on %s: %w", ref, err)
	}
	return tag.RowsAffected() == 1, nil
}
