package postgres

import (
	"encoding/json"

	"github.com/replayctl/replayctl/internal/store"
)

// pgLineageMigration holds lineage root -> Lineage (PostgreSQL).
const pgLineageMigration = `CREATE TABLE lineages (root text PRIMARY KEY, rec bytea NOT NULL);`

func (t *pgTx) Lineage(root string) (*store.Lineage, error) {
	return scanJSON[store.Lineage](t.queryRow(`SELECT rec FROM lineages WHERE root = $1`+t.lockClause(), pgKey(root)))
}

func (t *pgTx) PutLineage(l *store.Lineage) error {
	if t.ro {
		return store.ErrReadOnly
	}
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	t.queue("write lineage "+l.Root, nil, `INSERT INTO lineages (root, rec) VALUES ($1, $2)
		ON CONFLICT (root) DO UPDATE SET rec = excluded.rec`, pgKey(l.Root), data)
	return nil
}
