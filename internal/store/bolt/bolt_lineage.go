package bolt

import "github.com/replayctl/replayctl/internal/store"

// bucketLineages holds lineage root -> Lineage (bbolt).
var bucketLineages = []byte("lineages")

func (t *boltTx) Lineage(root string) (*store.Lineage, error) {
	return getJSON[store.Lineage](t.bucket(bucketLineages), store.DBKey(root))
}

func (t *boltTx) PutLineage(l *store.Lineage) error {
	return putJSON(t.bucket(bucketLineages), store.DBKey(l.Root), l)
}
