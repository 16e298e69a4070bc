package postgres

import "time"

// The claim's walk (schema version 21, issue 33). A claim walks
// entries_work from its start: the unchecked entries (last_checked NULL)
// in ref order, then those checked before the run. The start of that
// range is where every worker claimed first: the entries in flight, which
// it reads and skips (leased), and the index entries of the versions a
// replay left behind there (the insert's and the decision's, two an entry,
// both with last_checked NULL), which it steps over until a vacuum
// removes them. The walk grew with every entry replayed: by perf over 4
// workers and 2,000 entries, ~7% of PostgreSQL's CPU was the claim's
// subquery. A process now remembers the last unchecked ref it claimed in
// the run (claimAfter) and the claim walks on from there first; what it
// does not find there (entries behind the mark: a dead worker's, after
// its lease; a retry; an entry ingested behind it) it takes from the
// whole range, as before, in the same call. What a claim may take is
// unchanged; only the order in which a process meets them is.
//
// The function of migration 11 stays, for a replayctl older than this
// version still running during the upgrade.
const pgClaimAfterMigration = `CREATE FUNCTION replayctl_claim(p_since timestamptz, p_n int, p_owner text, p_lease_ms bigint, p_after text)
	   RETURNS TABLE (fence bigint, rec bytea, payload bytea, ref text, unchecked boolean)
	   LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
	 DECLARE refs text[] := '{}';
	 BEGIN
	   IF p_after IS NOT NULL THEN
	     refs := ARRAY(
	       SELECT c.ref FROM entries c
	       WHERE c.last_checked IS NULL AND c.ref > p_after AND (c.lease_until IS NULL OR c.lease_until < now())
	       ORDER BY c.last_checked NULLS FIRST, c.ref
	       LIMIT p_n
	       FOR UPDATE SKIP LOCKED);
	   END IF;
	   IF cardinality(refs) < p_n THEN
	     refs := refs || ARRAY(
	       SELECT c.ref FROM entries c
	       WHERE (c.last_checked IS NULL OR c.last_checked < p_since) AND (c.lease_until IS NULL OR c.lease_until < now())
	         AND c.ref <> ALL (refs)
	       ORDER BY c.last_checked NULLS FIRST, c.ref
	       LIMIT p_n - cardinality(refs)
	       FOR UPDATE SKIP LOCKED);
	   END IF;
	   RETURN QUERY UPDATE entries e SET lease_owner = p_owner, lease_until = now() + p_lease_ms * interval '1 millisecond', fence = nextval('fence_seq')
	     WHERE e.ref = ANY (refs)
	     RETURNING e.fence, e.rec, e.payload, e.ref, e.last_checked IS NULL;
	 END $$;`

// claimSQL claims up to $2 entries, walking on from $5 first (NULL: from
// the start).
const claimSQL = `SELECT fence, rec, payload, ref, unchecked FROM replayctl_claim($1, $2, $3, $4, $5)`

// claimMark is where this process's claims walk on from: the last
// unchecked ref it claimed in the run that began at since.
type claimMark struct {
	since time.Time
	after string
}

// claimAfter is the mark for a claim of the run since (nil: from the
// start, the run's first claim).
func (p *Postgres) claimAfter(since time.Time) *string {
	p.markMu.Lock()
	defer p.markMu.Unlock()
	if p.mark.after == "" || !p.mark.since.Equal(since) {
		return nil
	}
	after := p.mark.after
	return &after
}

// moveClaimMark moves the mark of the run since to ref when ref is past
// it (an unchecked entry this process claimed).
func (p *Postgres) moveClaimMark(since time.Time, ref string) {
	p.markMu.Lock()
	defer p.markMu.Unlock()
	if !p.mark.since.Equal(since) {
		p.mark = claimMark{since: since}
	}
	if ref > p.mark.after {
		p.mark.after = ref
	}
}
