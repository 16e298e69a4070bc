package store

import (
	"encoding/json"
	"slices"
	"time"
)

// Lineage is one replay lineage: the entries a system created by replaying
// one another (a job and the jobs its system's retry created, records of
// the same goal and context, messages carrying replayctl's lineage
// header; each connector's lineage.go says how). max_replays counts the replays of all its members
// together, from the last release of its budget.
type Lineage struct {
	// Root names the lineage (entry.Entry.Lineage).
	Root string `json:"root"`
	// Members are the refs of the entries seen in it, first seen first.
	Members []string `json:"members"`
	// Released is the lineage's replay count when a person last released
	// its budget (`dlq release-lineage`): replays count again from there.
	Released   int       `json:"released,omitempty"`
	ReleasedBy string    `json:"released_by,omitempty"`
	ReleasedAt time.Time `json:"released_at,omitzero"`
	// ReleaseReason is the person's reason, as audited.
	ReleaseReason string `json:"release_reason,omitempty"`
}

// Join adds ref to the lineage's members and reports whether it was new.
func (l *Lineage) Join(ref string) bool {
	if slices.Contains(l.Members, ref) {
		return false
	}
	l.Members = append(l.Members, ref)
	return true
}

// bucketLineages holds lineage root -> Lineage (bbolt).
var bucketLineages = []byte("lineages")

// pgLineageMigration holds lineage root -> Lineage (PostgreSQL).
const pgLineageMigration = `CREATE TABLE lineages (root text PRIMARY KEY, rec bytea NOT NULL);`

func (t *boltTx) Lineage(root string) (*Lineage, error) {
	return getJSON[Lineage](t.bucket(bucketLineages), dbKey(root))
}

func (t *boltTx) PutLineage(l *Lineage) error {
	return putJSON(t.bucket(bucketLineages), dbKey(l.Root), l)
}

func (t *pgTx) Lineage(root string) (*Lineage, error) {
	return scanJSON[Lineage](t.queryRow(`SELECT rec FROM lineages WHERE root = $1`+t.lockClause(), pgKey(root)))
}

func (t *pgTx) PutLineage(l *Lineage) error {
	if t.ro {
		return ErrReadOnly
	}
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	t.queue("write lineage "+l.Root, nil, `INSERT INTO lineages (root, rec) VALUES ($1, $2)
		ON CONFLICT (root) DO UPDATE SET rec = excluded.rec`, pgKey(l.Root), data)
	return nil
}
