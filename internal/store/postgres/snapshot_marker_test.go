package store

import (
	"context"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
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

func TestPostgresMovedSnapshotMarkerDoesNotHideADeletedSnapshot(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), Options{})
	snap := triage.NewSnapshot(triage.SourceFile{Name: "rules.yaml", Text: "rules: []\n"}, nil)
	if err := p.PutSnapshot(ctx, snap.ID, snap); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"jsonl:a", "jsonl:b"} {
		r := &audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: ref, PolicySnapshot: snap.ID}
		if err := p.Update(ctx, func(tx Tx) error { _, err := tx.Append(r); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.pool.Exec(ctx, `DELETE FROM snapshots WHERE id = $1`, snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := p.pool.Exec(ctx, `UPDATE snapshots SET body = convert_to('1000', 'UTF8') WHERE id = $1`, pgSnapshotsKeptFrom); err != nil {
		t.Fatal(err)
	}
	res, err := audit.Verify(ctx, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || res.Break.Seq != 1 || res.MissingSnapshots != 2 {
		t.Fatalf("deleted snapshot hidden by the marker: %+v", res)
	}
}
