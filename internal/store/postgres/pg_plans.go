package postgres

// What a replay cost PostgreSQL's CPU on top of its rows (issue 33,
// measured with pg_stat_statements and /proc on 4 workers, 2,000 entries,
// the 2-core dev machine):
//
//   - The sealer chains each audit record by updating it (prev, hash) after
//     its writer inserted it. The audit table's pages were full, so nine
//     updates in ten went to another page: a new index entry in each of
//     the table's five indexes, replayctl_audit_owner parsing the record's
//     JSON again for one of them, ~50 µs of the server's time a record and
//     three records a replay (~145 µs a replay, more than the claim). With
//     half of each page free (fillfactor 50, as entries since migration 7)
//     the update stays on its page and, changing no indexed column, is HOT:
//     no index entry, no expression evaluated. It applies to pages written
//     from now on; the space a sealed record's old version held is reused
//     by PostgreSQL's page pruning, not returned, so the table takes up to
//     twice the pages of a packed one.
//   - The claim and the release run their generic plan, made once per
//     connection at its first call (migration 11). A connection whose first
//     call met a table without statistics (a new database: the first run's
//     ingest, or the benchmark's fresh one; autovacuum analyzes a table
//     about a minute later) planned the claim's update of the refs it
//     locked and the release's join as sequential scans of entries, and
//     kept those plans until the table was analyzed: every claim read the
//     whole table (at 6,000 entries, a third of PostgreSQL's CPU in the
//     claim's function). With sequential scans off for the two functions
//     alone the plans are the primary-key probes whatever the statistics
//     (TestPostgresClaimUsesItsGenericPlan, fresh and analyzed).
const pgPlansMigration = `ALTER TABLE audit SET (fillfactor = 50);
	 ALTER FUNCTION replayctl_claim(timestamptz, int, text, bigint) SET enable_seqscan = off;
	 ALTER FUNCTION replayctl_release(text[], bigint[], bool[]) SET enable_seqscan = off;`
