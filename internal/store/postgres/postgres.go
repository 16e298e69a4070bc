package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// migrations are applied in order, each once, recorded in
// schema_migrations; never edit one that has shipped, add the next.
var migrations = []string{
	// 1: the state of replayctl, as in the bbolt file. Records are kept as
	// the exact JSON bytes replayctl wrote (bytea), payloads verbatim.
	`CREATE TABLE ledger (key text PRIMARY KEY, rec bytea NOT NULL);
	 CREATE TABLE entries (
	   ref text PRIMARY KEY, rec bytea NOT NULL, payload bytea,
	   lease_owner text, lease_until timestamptz, fence bigint NOT NULL DEFAULT 0, last_checked timestamptz);
	 CREATE INDEX entries_work ON entries (last_checked NULLS FIRST, ref);
	 CREATE TABLE approvals (id text PRIMARY KEY, rec bytea NOT NULL);
	 CREATE TABLE snapshots (id text PRIMARY KEY, body bytea NOT NULL);
	 CREATE TABLE audit (seq bigint PRIMARY KEY, prev text NOT NULL, hash text NOT NULL, body bytea NOT NULL);
	 CREATE TABLE audit_head (id int PRIMARY KEY CHECK (id = 1), seq bigint NOT NULL, hash text NOT NULL, mac text NOT NULL DEFAULT '');
	 INSERT INTO audit_head VALUES (1, 0, '` + audit.Genesis + `', '');
	 CREATE SEQUENCE fence_seq;`,
	// 2: indexes for filtered listings and counts (postgres_index.go).
	// replayctl_doc is immutable because rec is always UTF-8 JSON.
	`CREATE FUNCTION replayctl_doc(bytea) RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE
	   AS $$ SELECT convert_from($1, 'UTF8')::jsonb $$;
	 CREATE INDEX entries_status ON entries (lower(coalesce(replayctl_doc(rec)->>'status', '')), ref);
	 CREATE INDEX entries_class ON entries (lower(coalesce(replayctl_doc(rec)->>'class', '')), ref);
	 CREATE INDEX entries_action ON entries (lower(coalesce(replayctl_doc(rec)->>'action', '')), ref);
	 CREATE INDEX entries_source ON entries (lower(coalesce(replayctl_doc(rec)->'entry'->>'source', '')), ref);
	 CREATE INDEX entries_topic ON entries (coalesce(replayctl_doc(rec)->'entry'->>'topic', ''), ref);`,
	// 3: audit records are appended unchained and sealed later (pg_audit.go).
	pgAuditMigration,
	// 4: the last complete ingest, so a run ingests once (pg_claim.go).
	pgIngestMigration,
	// 5: long keys are stored under their hash (pg_keys.go).
	pgKeysMigration,
	// 6: decision and outcome counters (pg_counts.go), backfilled in Go.
	pgCountsMigration,
	// 7: room in each page of entries for the versions a replay writes
	// (claim, decision, outcome, release): a claim, which changes no
	// indexed column, is then a HOT update (no index entry, no expression
	// index evaluated) and every version stays on its page instead of all
	// writers queueing to extend the table's last one. Pages written from
	// now on; VACUUM FULL applies it to an existing table.
	`ALTER TABLE entries SET (fillfactor = 50);`,
	// 8: entry counters kept by a trigger, the signature and first-seen
	// columns, the oldest-open and pending-approval indexes
	// (pg_entry_counts.go), backfilled in Go.
	pgEntryCountsMigration,
	// 9: entries are counted in Go (pg_entry_counts.go); the triggers
	// count only the writes of a replayctl older than this version.
	pgEntryTriggers,
	// 10: the filtered fields in plain columns written from Go, indexed
	// instead of expressions over the record (pg_entry_cols.go).
	pgEntryColsMigration,
	// 11: the claim and the release as functions planned once per
	// connection (pg_claim.go).
	pgClaimFuncsMigration,
	// 12: audit records by entry, for an entry's history (pg_entry_audit.go).
	pgEntryAuditMigration,
	// 13: each record a keyed writer appends carries its MAC, checked by
	// the sealer before it chains the record (pg_audit.go).
	pgAuditRowMACMigration,
	// 14: replay lineages, so max_replays counts across a system's retry
	// chain (lineage.go).
	pgLineageMigration,
	// 15: failure groups: the group column, its index, the group
	// counters (backfilled in Go) and lifecycle records (pg_groups.go).
	pgGroupsMigration,
	// 16: audit records by actor, kind and time, for filtered audit pages
	// (pg_audit_index.go), backfilled in Go.
	pgAuditIndexMigration,
	// 17: the base of a pruned chain and a pending prune's mark
	// (pg_prune.go).
	pgPruneMigration,
	// 18: entries by their ref reversed, for lookups by source id
	// (pg_contract.go).
	pgRefIDMigration,
	// 19: room in each audit page for the sealer's update of the records
	// on it (a HOT update), and the claim and release functions planned
	// without sequential scans whatever the table's statistics were when a
	// connection first called them (pg_plans.go).
	pgPlansMigration,
	// 20: each audit record's owner (its entry or key) in a column written
	// from Go, indexed instead of an expression parsing the record
	// (pg_audit_owner.go).
	pgAuditOwnerMigration,
	// 21: a claim walks on from where this process's last claim of the
	// run ended first (pg_claim_after.go).
	pgClaimAfterMigration,
}

// migrationSteps run in Go after a migration's SQL, in its transaction.
var migrationSteps = map[int]func(context.Context, pgx.Tx) error{6: backfillCounts, 8: backfillEntryCounts, 15: backfillGroups, 16: backfillAuditIndex}

// advisory lock ids (pg_advisory_lock's bigint space).
const (
	lockMigrate  = 0x7265706c61790001 // "replay" + 1
	lockSchedule = 0x7265706c61790002
)

// Postgres is the shared store for many workers.
type Postgres struct {
	pool     *pgxpool.Pool
	key      []byte
	instance string
	// tamper counts the seals refused on a forged head or record.
	tamper store.TamperCount
	// keptSnapshots are the policy snapshots this process stored.
	keptSnapshots sync.Map
	// stopSealer ends this process's sealer loop and waits for it.
	stopSealer func()
	// settleWait overrides the package's settleWait (tests).
	settleWait time.Duration
	trace      *pgTrace
	// relMu guards the releases queued for the next claim (pg_claim.go).
	relMu     sync.Mutex
	relRefs   []string
	relTokens []int64
	relKept   []bool
	// checked are the claims (by fencing token) whose entry a committed
	// write under the claim marked checked (pg_claim.go); guarded by relMu.
	checked map[int64]bool
	// ahead holds the reads made ahead under claims, by fencing token
	// (pg_readahead.go).
	aheadMu sync.Mutex
	ahead   map[int64]*readAhead
	// mark is where this process's next claim walks on from
	// (pg_claim_after.go).
	markMu sync.Mutex
	mark   claimMark
}

// poolSize is the default pool: one connection for each of the worker's
// entries in flight (Options.MaxBatchSize, its --max-parallel) plus the
// ones a worker holds besides them: the sealer, the ingest lead's lock and
// its batch, the claim feed. pgxpool's default (4 or the CPU count) left
// a worker's slots queueing for connections.
func poolSize(inFlight int, def int32) int32 {
	if inFlight <= 0 {
		return def
	}
	return max(def, int32(inFlight)+4)
}

// Open connects and migrates the schema.
func Open(ctx context.Context, dsn string, o store.Options) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = poolSize(o.MaxBatchSize, cfg.MaxConns)
	}
	tr := newPGTrace()
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	p := &Postgres{pool: pool, key: o.AuditKey, instance: store.NewInstanceID(), trace: tr}
	if err := p.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if !o.ReadOnly {
		if len(o.AuditKey) > 0 {
			if err := p.markSigned(ctx); err != nil {
				pool.Close()
				return nil, err
			}
		}
		p.stopSealer = p.startSealer()
	}
	return p, nil
}

// Close seals what this process wrote (best effort: another process's
// sealer or the next one seals it otherwise) and releases the pool.
func (p *Postgres) Close() error {
	if p.stopSealer != nil {
		p.stopSealer()
	}
	p.pool.Close()
	return nil
}

func (p *Postgres) migrate(ctx context.Context) error {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres store: %w", err)
	}
	defer conn.Release()
	// Many workers start at once: one migrates, the others wait.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(lockMigrate)); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(lockMigrate))
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version int PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// Every migration not recorded is applied, in order (not only those
	// above the highest recorded: one recorded out of order, or lost, is
	// still run).
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	have := map[int]bool{}
	for _, v := range applied {
		have[v] = true
	}
	if n := len(applied); n > 0 && applied[n-1] > len(migrations) {
		return fmt.Errorf("migrate: the database has schema version %d, this replayctl knows %d: upgrade replayctl", applied[n-1], len(migrations))
	}
	for v := 1; v <= len(migrations); v++ {
		if have[v] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return err
			}
			if step := migrationSteps[v]; step != nil {
				if err := step(ctx, tx); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate to version %d: %w", v, err)
		}
	}
	return nil
}

// SchemaVersion reports the applied migration version: the highest
// version up to which every migration is recorded. One missing below
// another recorded one (lost, or taken out to replay an upgrade) is what
// the schema lacks: migrate applies it on the next start.
func (p *Postgres) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := p.pool.QueryRow(ctx, `SELECT coalesce(min(g.v), 1) - 1
		FROM generate_series(1, (SELECT coalesce(max(version), 0) + 1 FROM schema_migrations)) g(v)
		WHERE g.v NOT IN (SELECT version FROM schema_migrations)`).Scan(&v)
	return v, err
}

// errCreatedConcurrently: a first transition lost the race to create its
// key. No lock orders writers any more (the audit head was that lock), so
// the transaction is run again and sees the key as the winner left it,
// exactly as if it had waited for it.
var errCreatedConcurrently = errors.New("created concurrently")

// createdConcurrently names a first ledger write that lost the race to
// create its key (the insert Transition queues fails on ledger_pkey) as
// a conflict on the key, created concurrently, as the insert sent at once
// and found taken did.
func createdConcurrently(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "ledger_pkey" {
		return fmt.Errorf("%w: %w (%w)", idempotency.ErrConflict, err, errCreatedConcurrently)
	}
	return err
}

// retryable: the database aborted the transaction to keep it consistent.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// Update runs fn in a transaction (postgres_tx.go: its writes are sent
// in batches with the next read and with COMMIT). Writers share no row:
// audit records are appended unchained and sealed later (pg_audit.go). A
// deadlock or serialization failure is retried, so fn may run more than
// once.
func (p *Postgres) Update(ctx context.Context, fn func(store.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := createdConcurrently(p.update(ctx, fn))
		if err == nil || !(retryable(err) || errors.Is(err, errCreatedConcurrently)) || attempt >= 5 {
			return err
		}
	}
}

// View runs fn's reads, each a statement of its own (at READ COMMITTED a
// read-only transaction gave no more than that).
func (p *Postgres) View(ctx context.Context, fn func(store.Tx) error) error {
	return fn(&pgTx{ctx: ctx, q: p.pool, ro: true, p: p})
}

type pgTx struct {
	ctx context.Context
	q   pgQuerier
	ro  bool
	// p is the store (its reads ahead, pg_readahead.go; its claims' marks).
	p   *Postgres
	key []byte
	// start caches now() (the fence check and pg_audit.go fill it too).
	start time.Time
	// begin: BEGIN is still to be sent (with the first round trip);
	// begun: it was, and no COMMIT yet.
	begin, begun bool
	// pending are writes to send with the next round trip.
	pending []pgWrite
	// ledger holds the rows this transaction has locked, by stored key,
	// as it last wrote them (nil: no row).
	ledger map[string][]byte
	// fenced are the entries a fence check locked, by stored ref: one
	// under the claim in ctx, or several in a window's transaction
	// (UnderFence).
	fenced map[string]*fencedRow
	// written are the counter keys of the entries this transaction
	// wrote or locked to write, other than the fenced one, by stored ref
	// (nil: no row).
	written map[string]*entryKeys
	// entryDelta is what its entry writes add to the entry counters
	// (pg_entry_counts.go), written with COMMIT.
	entryDelta entryDelta
	// counts are what the records appended add to the counters
	// (pg_counts.go), written with COMMIT.
	counts map[countKey]int64
	// reserved are record numbers taken ahead for Append (pg_audit.go).
	reserved []int64
	// auditSeqs and auditBodies are the records appended (pg_audit.go),
	// inserted with COMMIT.
	auditSeqs   []int64
	auditBodies [][]byte
	auditMACs   []string
	// auditActors, auditKinds and auditAts are their indexed columns
	// (pg_audit_index.go).
	auditActors, auditKinds []string
	auditAts                []int64
	// auditOwners are their owners (pg_audit_owner.go).
	auditOwners []int64
}

func (t *pgTx) lockClause() string {
	if t.ro {
		return ""
	}
	return " FOR UPDATE"
}

func scanJSON[T any](row pgx.Row) (*T, error) {
	var b []byte
	if err := row.Scan(&b); errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (t *pgTx) Ledger(key string) (*idempotency.Record, error) {
	k := pgKey(key)
	if rec, ok := t.ledger[k]; ok {
		// Locked by this transaction (or absent, which the first write
		// checks): no one else changed it.
		return decodeJSON[idempotency.Record](rec)
	}
	if f, ok := store.FenceFrom(t.ctx); ok && t.ro && t.p != nil && f.Key != "" && pgKey(f.Key) == k {
		rec, err := t.aheadLedger(f, k)
		if err != nil {
			return nil, err
		}
		return decodeJSON[idempotency.Record](rec)
	}
	var rec []byte
	if err := t.queryRow(`SELECT rec FROM ledger WHERE key = $1`+t.lockClause(), k).Scan(&rec); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	if !t.ro {
		t.ledger[k] = rec
	}
	return decodeJSON[idempotency.Record](rec)
}

func decodeJSON[T any](b []byte) (*T, error) {
	if b == nil {
		return nil, nil
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// fencedRow is an entry a fence check locked in this transaction.
type fencedRow struct {
	token int64
	// rec/payload are the row as this transaction last wrote it; sig and
	// seen its columns as read; keys its counter keys as this transaction
	// last wrote it (nil: not written yet, rec is the row as read).
	rec, payload []byte
	sig          *string
	seen         pgtype.Timestamptz
	keys         *entryKeys
	// checked: the last write of the entry set last_checked
	// (pg_claim.go); wrote: the transaction wrote it at all.
	checked, wrote bool
}

// checkFence rejects a transition made under a claim that is no longer
// current: another worker took the entry over, or the lease ran out.
func (t *pgTx) checkFence(f store.Fence) error {
	row := &fencedRow{token: f.Token}
	var token int64
	var live bool
	var now time.Time
	ref := pgKey(f.Ref)
	// The row the check locks is the entry the transaction writes: read
	// with it, and the transaction's clock too, in BEGIN's round trip, and
	// the entry's ledger row (locked, as Ledger would) when its key is
	// known, in the same statement (a statement costs the backend about
	// as much as the row it reads). The entry is locked first, as before:
	// the materialized CTE runs before the subquery that locks the ledger
	// row (no row: NULL, rec is NOT NULL).
	br, writes := t.send(func(b *pgx.Batch) {
		if f.Key != "" {
			b.Queue(`WITH e AS MATERIALIZED (SELECT fence, coalesce(lease_until > now(), false) AS live, now() AS now, rec, payload, sig, seen
				FROM entries WHERE ref = $1 FOR UPDATE)
				SELECT e.*, (SELECT l.rec FROM ledger l WHERE l.key = $2 FOR UPDATE) FROM e`, ref, pgKey(f.Key))
		} else {
			b.Queue(`SELECT fence, coalesce(lease_until > now(), false), now(), rec, payload, sig, seen FROM entries WHERE ref = $1 FOR UPDATE`, ref)
		}
	})
	err := drain(br, writes)
	if err == nil {
		dest := []any{&token, &live, &now, &row.rec, &row.payload, &row.sig, &row.seen}
		var rec []byte
		if f.Key != "" {
			dest = append(dest, &rec)
		}
		if err = br.QueryRow().Scan(dest...); err == nil && f.Key != "" {
			t.ledger[pgKey(f.Key)] = rec
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("check fence of %s: %w", f.Ref, err)
	}
	t.start = now.UTC()
	if token != f.Token || !live {
		return fmt.Errorf("%w (entry %s: token %d, current %d, lease live %v)", store.ErrStaleFence, f.Ref, f.Token, token, live)
	}
	if t.fenced == nil {
		t.fenced = map[string]*fencedRow{}
	}
	t.fenced[ref] = row
	return nil
}

func (t *pgTx) Transition(tr idempotency.Transition) (idempotency.Record, error) {
	if t.ro {
		return idempotency.Record{}, store.ErrReadOnly
	}
	cur, err := t.Ledger(tr.Key)
	if err != nil {
		return idempotency.Record{}, err
	}
	now, err := t.now()
	if err != nil {
		return idempotency.Record{}, err
	}
	next, err := idempotency.Apply(cur, tr, now)
	if err != nil {
		return idempotency.Record{}, err
	}
	data, err := json.Marshal(&next)
	if err != nil {
		return idempotency.Record{}, err
	}
	if cur == nil {
		// No row to lock: two first transitions race on the insert. It
		// goes with the transaction's next round trip (issue 33: sent at
		// once it was a round trip of its own per new key, one per
		// replay, before the intent's COMMIT). The second insert of a
		// key waits on the first's row, then fails the statement
		// (ledger_pkey), and with it the transaction, whose other writes
		// went in the same batch: nothing of it commits, and Update runs
		// it again on the key as the winner left it (createdConcurrently).
		t.queue("create ledger key "+tr.Key, nil, `INSERT INTO ledger (key, rec) VALUES ($1, $2)`, pgKey(tr.Key), data)
	} else {
		t.queue("write ledger key "+tr.Key, nil, `UPDATE ledger SET rec = $2 WHERE key = $1`, pgKey(tr.Key), data)
	}
	t.ledger[pgKey(tr.Key)] = data
	return next, nil
}

// now is the transaction's start time, as PostgreSQL's now() is: asked
// once per transaction, a round trip saved on every later use.
func (t *pgTx) now() (time.Time, error) {
	if !t.start.IsZero() {
		return t.start, nil
	}
	var now time.Time
	if err := t.queryRow(`SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, err
	}
	t.start = now.UTC()
	return t.start, nil
}

func (t *pgTx) Entry(ref string) (*store.EntryRecord, error) {
	if row := t.fenced[pgKey(ref)]; row != nil {
		return decodeEntryBytes(row.rec, row.payload)
	}
	if f, ok := store.FenceFrom(t.ctx); ok && t.ro && t.p != nil && pgKey(f.Ref) == pgKey(ref) {
		if rec, payload, found, kept := t.aheadEntry(f); kept {
			if !found {
				return nil, nil
			}
			return decodeEntryBytes(rec, payload)
		}
	}
	if t.ro {
		return scanEntry(t.queryRow(`SELECT rec, payload FROM entries WHERE ref = $1`, pgKey(ref)))
	}
	// Locked in a read-write transaction, as approvals and ledger rows
	// are: a person's change and a worker's are read-modify-writes, and
	// without the lock the later writer overwrote what it never read. The
	// row's counted keys are kept too, so that a PutEntry of it need not
	// read the row again (a bulk change of N entries: N round trips, not 2N).
	k := pgKey(ref)
	var rec, payload []byte
	var sig *string
	var seen pgtype.Timestamptz
	err := t.queryRow(`SELECT rec, payload, sig, seen FROM entries WHERE ref = $1 FOR UPDATE`, k).Scan(&rec, &payload, &sig, &seen)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil // no row, no lock: PutEntry's insert finds a racing one
	} else if err != nil {
		return nil, err
	}
	if _, ok := t.written[k]; !ok {
		keys, err := storedKeys(rec, sig, seen)
		if err != nil {
			return nil, fmt.Errorf("count entry %s: %w", ref, err)
		}
		if t.written == nil {
			t.written = map[string]*entryKeys{}
		}
		t.written[k] = &keys
	}
	return decodeEntryBytes(rec, payload)
}

func scanEntry(row pgx.Row) (*store.EntryRecord, error) {
	var rec, payload []byte
	if err := row.Scan(&rec, &payload); errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return decodeEntryBytes(rec, payload)
}

func decodeEntryBytes(rec, payload []byte) (*store.EntryRecord, error) {
	var se store.StoredEntry
	if err := json.Unmarshal(rec, &se); err != nil {
		return nil, err
	}
	return store.DecodeEntry(&se, payload), nil
}

// The statements writing an entry row: its key, record and payload, then
// the columns colsOf computes (entryCols.values), and for a write under
// the entry's claim whether it marks the entry checked (checksClaim).
var (
	insertEntry                = entryWriteSQL(true, true, false)
	updateEntryPayload         = entryWriteSQL(false, true, false)
	updateEntryPayloadChecking = entryWriteSQL(false, true, true)
	updateEntryChecking        = entryWriteSQL(false, false, true)
)

// entryWriteSQL numbers the parameters as entryCols.values gives them
// ($1 the key, $2 the record, then the payload when payload), the check
// last.
func entryWriteSQL(insert, payload, check bool) string {
	cols := []string{"rec"}
	if payload {
		cols = append(cols, "payload")
	}
	cols = append(cols, entryColNames...)
	if insert {
		marks := make([]string, len(cols)+1)
		for i := range marks {
			marks[i] = fmt.Sprintf("$%d", i+1)
		}
		return "INSERT INTO entries (ref, " + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ") ON CONFLICT (ref) DO NOTHING"
	}
	set := make([]string, len(cols))
	for i, col := range cols {
		set[i] = fmt.Sprintf("%s = $%d", col, i+2)
	}
	if check {
		set = append(set, fmt.Sprintf("last_checked = CASE WHEN $%d THEN now() END", len(cols)+2))
	}
	return "UPDATE entries SET " + strings.Join(set, ", ") + " WHERE ref = $1"
}

func (t *pgTx) PutEntry(r *store.EntryRecord) error {
	if t.ro {
		return store.ErrReadOnly
	}
	payload := []byte(r.Entry.Payload)
	rec, err := json.Marshal(store.EncodeEntry(r))
	if err != nil {
		return err
	}
	ref := pgKey(r.Entry.Ref())
	c := colsOf(r)
	keys := keysOf(r, c)
	if row := t.fenced[ref]; row != nil {
		// The row exists (the fence locked it).
		old := row.keys
		if old == nil {
			k, err := storedKeys(row.rec, row.sig, row.seen)
			if err != nil {
				return fmt.Errorf("count entry %s: %w", r.Entry.Ref(), err)
			}
			old = &k
		}
		t.countEntry(old, &keys)
		// The last write under the claim decides: an intent after an
		// outcome-like write (a probe's, then an approved replay's
		// dispatch) must leave the entry unchecked again, or a worker
		// dying during that dispatch would leave it to the next run.
		check := checksClaim(r)
		row.checked, row.wrote = check, true
		if bytes.Equal(payload, row.payload) {
			// Its payload is the one stored: write only the record.
			t.queue("write entry "+r.Entry.Ref(), nil, updateEntryChecking, append(c.values(ref, rec), check)...)
		} else {
			t.queue("write entry "+r.Entry.Ref(), nil, updateEntryPayloadChecking, append(c.values(ref, rec, payload), check)...)
		}
		row.rec, row.payload, row.keys = rec, payload, &keys
		return nil
	}
	old, locked := t.written[ref]
	if !locked {
		// The row this write replaces, locked until COMMIT: what the
		// counters lose.
		var oldRec []byte
		var sig *string
		var seen pgtype.Timestamptz
		err := t.queryRow(`SELECT rec, sig, seen FROM entries WHERE ref = $1 FOR UPDATE`, ref).Scan(&oldRec, &sig, &seen)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return fmt.Errorf("read entry %s: %w", r.Entry.Ref(), err)
		default:
			k, err := storedKeys(oldRec, sig, seen)
			if err != nil {
				return fmt.Errorf("count entry %s: %w", r.Entry.Ref(), err)
			}
			old = &k
		}
	}
	t.countEntry(old, &keys)
	if t.written == nil {
		t.written = map[string]*entryKeys{}
	}
	if old == nil {
		// No row to lock: two first writes race on the insert, sent at
		// once so that the second waits on the first's row, then runs
		// again (Update) and replaces it.
		err := t.exec("create entry "+r.Entry.Ref(), func(tag pgconn.CommandTag) error {
			if tag.RowsAffected() == 0 {
				return fmt.Errorf("write entry %s: %w", r.Entry.Ref(), errCreatedConcurrently)
			}
			return nil
		}, insertEntry, c.values(ref, rec, payload)...)
		if err != nil {
			return err
		}
	} else {
		t.queue("write entry "+r.Entry.Ref(), nil, updateEntryPayload, c.values(ref, rec, payload)...)
	}
	t.written[ref] = &keys
	return nil
}

// PrepareEntry works nothing out ahead: PostgreSQL has no single writer
// whose lock the work would be taken out of.
func (p *Postgres) PrepareEntry(prev, next *store.EntryRecord) *store.PreparedEntry { return nil }

// PutPrepared: nothing is prepared (Postgres.PrepareEntry); the caller
// puts the entry with PutEntry.
func (t *pgTx) PutPrepared(*store.PreparedEntry) (bool, error) { return false, nil }

func (t *pgTx) Approval(id string) (*store.Approval, error) {
	return scanJSON[store.Approval](t.queryRow(`SELECT rec FROM approvals WHERE id = $1`+t.lockClause(), pgKey(id)))
}

func (t *pgTx) PutApproval(a *store.Approval) error {
	if t.ro {
		return store.ErrReadOnly
	}
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	pending, at := approvalCols(a)
	t.queue("write approval "+a.ID, nil, `INSERT INTO approvals (id, rec, pending, requested_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET rec = excluded.rec, pending = excluded.pending, requested_at = excluded.requested_at`, pgKey(a.ID), data, pending, at)
	return nil
}

// LedgerView implements replay.LedgerReader.
func (p *Postgres) LedgerView(ctx context.Context, key string) (triage.LedgerView, error) {
	return store.LedgerView(ctx, p, key)
}

// LedgerRecords calls fn for every ledger record.
func (p *Postgres) LedgerRecords(ctx context.Context, fn func(*idempotency.Record) error) error {
	return eachRow(ctx, p, `SELECT rec FROM ledger ORDER BY key`, func(b []byte) error {
		var r idempotency.Record
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		return fn(&r)
	})
}

// Approvals calls fn for every approval request.
func (p *Postgres) Approvals(ctx context.Context, fn func(*store.Approval) error) error {
	return eachRow(ctx, p, `SELECT rec FROM approvals ORDER BY id`, func(b []byte) error {
		var a store.Approval
		if err := json.Unmarshal(b, &a); err != nil {
			return err
		}
		return fn(&a)
	})
}

// eachRow streams a one-column query in pages (keyset on the row number
// would need a key; these tables are read whole by reports).
func eachRow(ctx context.Context, p *Postgres, q string, fn func([]byte) error) error {
	rows, err := p.pool.Query(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return err
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Entries calls fn for every entry in ref order, paging by key so a large
// table is never held at once.
func (p *Postgres) Entries(ctx context.Context, fn func(*store.EntryRecord) error) error {
	after := ""
	for {
		rows, err := p.pool.Query(ctx, `SELECT ref, rec, payload FROM entries WHERE ref > $1 ORDER BY ref LIMIT 1000`, after)
		if err != nil {
			return err
		}
		var page []*store.EntryRecord
		for rows.Next() {
			var ref string
			var rec, payload []byte
			if err := rows.Scan(&ref, &rec, &payload); err != nil {
				rows.Close()
				return err
			}
			er, err := decodeEntryBytes(rec, payload)
			if err != nil {
				rows.Close()
				return fmt.Errorf("decode entry %q: %w", ref, err)
			}
			page = append(page, er)
			after = ref
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, er := range page {
			if err := fn(er); err != nil {
				return err
			}
		}
		if len(page) < 1000 {
			return nil
		}
	}
}

// AuditRange implements audit.Reader: the records up to the sealed head
// (a sealed record never changes), after sealing what is settled.
func (p *Postgres) AuditRange(ctx context.Context, from uint64, fn func(uint64, audit.Sealed, error) error) error {
	p.flushAudit(ctx)
	for {
		rows, err := p.pool.Query(ctx, `SELECT seq, coalesce(prev, ''), coalesce(hash, ''), body FROM audit
			WHERE seq >= $1 AND seq <= (SELECT seq FROM audit_head WHERE id = 1) ORDER BY seq LIMIT 1000`, int64(from))
		if err != nil {
			return err
		}
		var page []audit.Sealed
		for rows.Next() {
			var s audit.Sealed
			var seq int64
			var body []byte
			if err := rows.Scan(&seq, &s.Prev, &s.Hash, &body); err != nil {
				rows.Close()
				return err
			}
			s.Seq, s.Body = uint64(seq), body
			page = append(page, s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, s := range page {
			if err := fn(s.Seq, s, nil); err != nil {
				return err
			}
			from = s.Seq + 1
		}
		if len(page) < 1000 {
			return nil
		}
	}
}

// AuditHead implements audit.Reader.
func (p *Postgres) AuditHead(ctx context.Context) (uint64, string, error) {
	var seq int64
	var hash string
	err := p.pool.QueryRow(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&seq, &hash)
	return uint64(seq), hash, err
}

// AuditHeadMAC implements audit.Reader.
func (p *Postgres) AuditHeadMAC(ctx context.Context) (string, error) {
	var mac string
	err := p.pool.QueryRow(ctx, `SELECT mac FROM audit_head WHERE id = 1`).Scan(&mac)
	return mac, err
}

// PutSnapshot keeps a snapshot's text (once).
func (p *Postgres) PutSnapshot(ctx context.Context, id string, snapshot any) error {
	data, err := json.Marshal(snapshot)
	if err != nil {
		return err
	}
	if err := p.markSnapshotsKept(ctx); err != nil { // snapshot_check.go
		return err
	}
	if _, err = p.pool.Exec(ctx, `INSERT INTO snapshots (id, body) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, data); err != nil {
		return err
	}
	p.keptSnapshots.Store(id, true) // Append flags the records naming it
	return nil
}

// Snapshot loads a stored snapshot.
func (p *Postgres) Snapshot(ctx context.Context, id string, out any) error {
	if id == pgSnapshotsKeptFrom {
		return store.ErrNotFound // the store's marker row, not a snapshot
	}
	var b []byte
	err := p.pool.QueryRow(ctx, `SELECT body FROM snapshots WHERE id = $1`, id).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// Ingest implements Shared: one statement inserts the batch's new
// entries and adds what the inserted ones count (an entry already stored
// counts nothing), in one transaction with setCountsInGo. Of two records
// with one ref the first is kept, as inserting them in turn did. A
// deadlock on a counter row shared with another writer (one older than
// schema version 9, counting by trigger) is retried.
func (p *Postgres) Ingest(ctx context.Context, recs []*store.EntryRecord) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	var refs, sigs, states, grps []string
	var classes, actions, sources, topics []string
	var recBytes, payloads [][]byte
	var seens, opens []pgtype.Timestamptz
	var lfs []int64
	seen := map[string]bool{}
	delta := entryDelta{}
	var counted countRows
	for _, r := range recs {
		ref := pgKey(r.Entry.Ref())
		if seen[ref] {
			continue
		}
		seen[ref] = true
		rec, err := json.Marshal(store.EncodeEntry(r))
		if err != nil {
			return 0, err
		}
		c := colsOf(r)
		refs, recBytes, payloads = append(refs, ref), append(recBytes, rec), append(payloads, []byte(r.Entry.Payload))
		sigs, seens, opens, states, lfs = append(sigs, c.sig), append(seens, c.seen), append(opens, c.openSeen), append(states, c.state), append(lfs, c.lastFailed)
		classes, actions, sources, topics = append(classes, c.class), append(actions, c.action), append(sources, c.source), append(topics, c.topic)
		grps = append(grps, c.grp)
		// Each record's own rows, tagged with its ref: the statement adds
		// those of the refs it inserted.
		keys := keysOf(r, c)
		clear(delta)
		delta.add(nil, &keys)
		delta.appendTo(&counted, ref)
	}
	args := append([]any{refs, recBytes, payloads, sigs, seens, opens, states, lfs, counted.refs}, counted.args()...)
	args = append(args, classes, actions, sources, topics, grps)
	for attempt := 0; ; attempt++ {
		n, err := p.ingest(ctx, args)
		if err == nil || !retryable(err) || attempt >= 5 {
			return n, err
		}
	}
}

// ingestSQL inserts the entries given as arrays ($1-$8, and their
// filter columns $18-$21) and adds the counter rows ($10-$17, each of the
// entry $9) of those it inserted.
const ingestSQL = `WITH ins AS (
	  INSERT INTO entries (ref, rec, payload, sig, seen, open_seen, state, last_failed, class, action, source, topic, grp)
	  SELECT * FROM unnest($1::text[], $2::bytea[], $3::bytea[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::text[], $8::bigint[],
	    $18::text[], $19::text[], $20::text[], $21::text[], $22::text[])
	  ON CONFLICT (ref) DO NOTHING
	  RETURNING ref),
	counted AS (
	  INSERT INTO entry_counts (dim, at, kh, key, shard, n)
	  SELECT u.dim, u.at, sha256(convert_to(k.key::text, 'UTF8')), k.key, pg_backend_pid() % ` + "16" + `, sum(u.n)
	  FROM unnest($9::text[], $10::text[], $11::timestamptz[], $12::text[], $13::text[], $14::text[], $15::text[], $16::int[], $17::bigint[])
	    AS u(ref, dim, at, k1, k2, k3, k4, len, n),
	    LATERAL (SELECT (ARRAY[u.k1, u.k2, u.k3, u.k4])[1:u.len] AS key) k
	  WHERE u.ref IN (SELECT ref FROM ins)
	  GROUP BY 1, 2, 3, 4
	  ORDER BY 1, 2, 3
	  ON CONFLICT (dim, at, kh, shard) DO UPDATE SET n = entry_counts.n + excluded.n)
	SELECT count(*) FROM ins`

func (p *Postgres) ingest(ctx context.Context, args []any) (int, error) {
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(setCountsInGo)
	b.Queue(ingestSQL, args...)
	b.Queue("commit")
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	br := conn.SendBatch(ctx, b)
	var n int
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&n)
	}
	if err = finishCommit(br, err); err != nil {
		// A batch that failed after BEGIN leaves the connection in a
		// transaction: roll back, or drop the connection.
		if _, rerr := conn.Exec(context.WithoutCancel(ctx), "rollback"); rerr != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
		return 0, err
	}
	return n, nil
}

// Claim implements Shared; the releases queued by ReleaseLater go in the
// same round trip, before the claim.
//
// The releases and the claim are one implicit transaction, which
// PostgreSQL may abort as a deadlock: a release updates rows of this
// worker's that another worker's window may be locking for its fence
// checks (a stale claim of its own). The whole round trip is then sent
// again, as Update retries its transactions.
func (p *Postgres) Claim(ctx context.Context, owner string, since time.Time, n int, lease time.Duration) ([]store.Claim, error) {
	refs, tokens, kept := p.takeReleases()
	for attempt := 1; ; attempt++ {
		out, err := p.claim(ctx, refs, tokens, kept, owner, since, n, lease)
		if err == nil || !retryable(err) || attempt > 5 || ctx.Err() != nil {
			return out, err
		}
	}
}

func (p *Postgres) claim(ctx context.Context, refs []string, tokens []int64, kept []bool, owner string, since time.Time, n int, lease time.Duration) ([]store.Claim, error) {
	until := time.Now().Add(lease)
	b := &pgx.Batch{}
	if len(refs) > 0 {
		b.Queue(releaseMany, refs, tokens, kept)
	}
	b.Queue(claimSQL, since, n, owner, lease.Milliseconds(), p.claimAfter(since))
	br := p.pool.SendBatch(ctx, b)
	defer br.Close()
	if len(refs) > 0 {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("release %d claims: %w", len(refs), err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	defer rows.Close()
	var out []store.Claim
	for rows.Next() {
		var token int64
		var rec, payload []byte
		var ref string
		var unchecked bool
		if err := rows.Scan(&token, &rec, &payload, &ref, &unchecked); err != nil {
			return nil, err
		}
		if unchecked {
			p.moveClaimMark(since, ref)
		}
		er, err := decodeEntryBytes(rec, payload)
		if err != nil {
			return nil, err
		}
		out = append(out, store.Claim{Entry: er, Token: token, Until: until})
	}
	return out, rows.Err()
}

// ClaimRef implements Shared.
func (p *Postgres) ClaimRef(ctx context.Context, ref, owner string, lease time.Duration) (store.Claim, bool, error) {
	until := time.Now().Add(lease)
	var token int64
	var rec, payload []byte
	err := p.pool.QueryRow(ctx, `
		UPDATE entries SET lease_owner = $2, lease_until = now() + $3 * interval '1 millisecond', fence = nextval('fence_seq')
		WHERE ref = $1 AND (lease_until IS NULL OR lease_until < now())
		RETURNING fence, rec, payload`, pgKey(ref), owner, lease.Milliseconds()).Scan(&token, &rec, &payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Claim{}, false, nil
	}
	if err != nil {
		return store.Claim{}, false, fmt.Errorf("claim %s: %w", ref, err)
	}
	er, err := decodeEntryBytes(rec, payload)
	if err != nil {
		return store.Claim{}, false, err
	}
	return store.Claim{Entry: er, Token: token, Until: until}, true, nil
}

// Release implements Shared.
func (p *Postgres) Release(ctx context.Context, ref string, token int64) error {
	p.dropAhead(token)
	_, err := p.pool.Exec(ctx, releaseMany, []string{pgKey(ref)}, []int64{token}, []bool{p.takeChecked(token)})
	return err
}

// Now implements Shared.
func (p *Postgres) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := p.pool.QueryRow(ctx, `SELECT now()`).Scan(&now)
	return now.UTC(), err
}

// TryRunLock implements Shared with a session advisory lock held on a
// dedicated connection until released.
func (p *Postgres) TryRunLock(ctx context.Context) (func(), bool, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(lockSchedule)).Scan(&ok); err != nil {
		conn.Release()
		return nil, false, err
	}
	if !ok {
		conn.Release()
		return nil, false, nil
	}
	return func() {
		_, _ = conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(lockSchedule))
		conn.Release()
	}, true, nil
}

// LeaseHolder reports who holds an entry's lease (tests, reports).
func (p *Postgres) LeaseHolder(ctx context.Context, ref string) (owner string, until time.Time, token int64, err error) {
	var o *string
	var u *time.Time
	err = p.pool.QueryRow(ctx, `SELECT lease_owner, lease_until, fence FROM entries WHERE ref = $1`, pgKey(ref)).Scan(&o, &u, &token)
	if o != nil {
		owner = *o
	}
	if u != nil {
		until = *u
	}
	return owner, until, token, err
}
