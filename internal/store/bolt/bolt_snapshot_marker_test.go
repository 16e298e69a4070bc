package bolt

import (
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Issue 29: deleting policy snapshots and moving the unsigned
// snapshots_kept_from marker past the records (or deleting it) passed
// verify. Each record now says, under the chain, that its snapshot was
// stored when it was written.
func TestMovedSnapshotMarkerDoesNotHideADeletedSnapshot(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(meta *bolt.Bucket) error
	}{
		{"marker moved past the chain", func(meta *bolt.Bucket) error { return meta.Put(keySnapshotsKeptFrom, []byte("1000")) }},
		{"marker deleted", func(meta *bolt.Bucket) error { return meta.Delete(keySnapshotsKeptFrom) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, id := snapshotChain(t, true)
			deleteSnapshot(t, path, id)
			tamper(t, path, func(_, meta *bolt.Bucket) error { return c.edit(meta) })
			res := verifyFile(t, path, nil)
			if res.OK() || res.Break.Seq != 2 || !strings.Contains(res.Break.Reason, "deleted") || res.MissingSnapshots != 3 {
				t.Fatalf("deleted snapshot hidden by the marker: %+v", res)
			}
		})
	}
}
