package postgres

import (
	"context"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

func TestPostgresMovedSnapshotMarkerDoesNotHideADeletedSnapshot(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	snap := triage.NewSnapshot(triage.SourceFile{Name: "rules.yaml", Text: "rules: []\n"}, nil)
	if err := p.PutSnapshot(ctx, snap.ID, snap); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"jsonl:a", "jsonl:b"} {
		r := &audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: ref, PolicySnapshot: snap.ID}
		if err := p.Update(ctx, func(tx store.Tx) error { _, err := tx.Append(r); return err }); err != nil {
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
