package postgres

// Filter columns (schema version 10, issue 16: PostgreSQL workers that
// scale). Migration 2 indexed the filtered fields as expressions over the
// record (lower(replayctl_doc(rec)->>'class'), ...). An expression index
// names the column it reads, rec, and every decision and outcome rewrites
// rec, so none of those updates could be HOT; worse, each new row version
// parsed the whole record as jsonb once for each of the five indexes (20
// parses per replay: the insert, the decision, the outcome and the
// release, which is not HOT either since it moves last_checked). Four
// workers were bound by PostgreSQL's CPU, most of it per row version.
//
// The values are now plain columns written from Go with the record
// (entryCols: class, action, source, topic; the status was already the
// state column), the indexes are on them, and the filters read them
// (pgDimIndex): the same expressions over the same values, so a filter
// matches exactly what it matched. An update that changes none of them,
// nor another indexed column, is HOT; one that does adds index entries but
// parses nothing.
//
// A replayctl older than version 10 still running during the upgrade (it
// checked the version when it started) writes rec without the new
// columns: a BEFORE trigger fills them from the record for it, as
// migration 9's triggers count its writes. A newer writer says it wrote
// them (colsInGoSetting, set in the same statement as countsInGoSetting,
// so it costs no statement), and the trigger's WHEN clause skips it before
// any function runs. The older binary's own filtered reads still spell the
// expressions over rec: they keep their answers, without an index.
const pgEntryColsMigration = `ALTER TABLE entries ADD COLUMN class text, ADD COLUMN action text, ADD COLUMN source text, ADD COLUMN topic text;
	 UPDATE entries SET class = coalesce(d->>'class', ''), action = coalesce(d->>'action', ''),
	   source = coalesce(d->'entry'->>'source', ''), topic = coalesce(d->'entry'->>'topic', '')
	   FROM (SELECT ref AS r, replayctl_doc(rec) AS d FROM entries) x WHERE ref = x.r;
	 CREATE FUNCTION replayctl_entry_cols() RETURNS trigger LANGUAGE plpgsql AS $$
	 DECLARE d jsonb := replayctl_doc(NEW.rec);
	 BEGIN
	   NEW.class := coalesce(d->>'class', '');
	   NEW.action := coalesce(d->>'action', '');
	   NEW.source := coalesce(d->'entry'->>'source', '');
	   NEW.topic := coalesce(d->'entry'->>'topic', '');
	   RETURN NEW;
	 END $$;
	 CREATE TRIGGER entries_cols BEFORE INSERT OR UPDATE OF rec ON entries FOR EACH ROW
	   WHEN (current_setting('` + colsInGoSetting + `', true) IS DISTINCT FROM 'on')
	   EXECUTE FUNCTION replayctl_entry_cols();
	 DROP INDEX entries_status, entries_class, entries_action, entries_source, entries_topic;
	 CREATE INDEX entries_status ON entries (lower(coalesce(state, '')), ref);
	 CREATE INDEX entries_class ON entries (lower(coalesce(class, '')), ref);
	 CREATE INDEX entries_action ON entries (lower(coalesce(action, '')), ref);
	 CREATE INDEX entries_source ON entries (lower(coalesce(source, '')), ref);
	 CREATE INDEX entries_topic ON entries (coalesce(topic, ''), ref);`

// colsInGoSetting is set (for its transaction only) by a transaction
// that writes the filter columns of the entries it writes.
const colsInGoSetting = "replayctl.cols_in_go"

// Filter expressions over the columns, as the indexes above spell them.
const (
	pgStatusCol = `state`
	pgClassCol  = `class`
	pgActionCol = `action`
	pgSourceCol = `source`
	pgTopicCol  = `topic`
)
